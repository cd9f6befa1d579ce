"""The app's screens: start, the run (main), and the modals it opens."""
