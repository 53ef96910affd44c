"""The main window: its layout (main_window, layout), the collaborators it hands itself to
(parameters, run, files, data; typed by host.WindowHost), its actions and shortcuts, and the
run controller that talks to the engine backend."""
