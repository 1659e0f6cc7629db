from launchtui.cli import main

raise SystemExit(main())
