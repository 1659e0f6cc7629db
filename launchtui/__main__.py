from launchtui.entry import main

main()
