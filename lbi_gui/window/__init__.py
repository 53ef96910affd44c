"""The main window: its layout (main_window), what it does with data, files and runs (the
data/files/run mixins), its actions and shortcuts, the run controller that talks to the engine
backend, and the Qt bridge that re-emits the Qt-free model's events as signals."""
