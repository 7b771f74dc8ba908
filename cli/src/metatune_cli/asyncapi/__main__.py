import sys

from . import render

sys.stdout.write(render())
