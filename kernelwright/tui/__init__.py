"""The Textual TUI (`kernelwright tui`): watch and steer an optimization run, browse a finished
one, chat with Nsight Compute reports. Layer 1 (a frontend): it reads the agent's event stream
and steers through `agent.control.RunControl`; nothing below it imports textual.

- `app.py`: `make_app(settings, ...)`, the app and its commands;
- `launch.py`: what a run needs (`RunRequest`, `RunBackend`) and the thread it runs in;
- `host.py`: `AppHost`, what the screens ask of the app (so no screen imports `app.py`);
- `screens/`: start, run (the main screen), plan approval, prompts, report chat;
- `widgets/`: timeline, candidate tree, detail panes, meters, speedup chart.
"""
