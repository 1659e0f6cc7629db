"""launchtui: is the GPU waiting on the CPU's kernel launches?"""
__version__ = "0.1.0"
