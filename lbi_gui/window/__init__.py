"""The main window: its layout (main_window, layout, parts), the collaborators it wires
(parameters, run, files, exports, data: each given the view state and its widgets, never the
window), its actions and shortcuts, and the run controller that talks to the engine backend."""
