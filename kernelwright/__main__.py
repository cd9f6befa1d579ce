"""`python -m kernelwright` works where the console script is not installed."""

from kernelwright.cli import main

if __name__ == "__main__":
    main()
