"""Foresay's window (PySide6). It shows the pipeline; it never calls a model.

Wiring, done by the app layer:
- `EventBridge.post(event)` (any thread) is the only way events reach the UI;
- `MainWindow(bridge, qsettings, WindowConfig, SettingsChoices, SettingsOptions)` shows the
  bridge's view models on a timer (<= 30 Hz) and emits what the user does as signals
  (ptt_pressed, ptt_released, mode_changed, mute_toggled, stop_reply, input_device_changed,
  output_device_changed, settings_changed, new_conversation);
- `set_input_devices` / `set_output_devices` feed the device pickers.
"""
