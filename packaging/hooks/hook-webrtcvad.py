# Foresay installs webrtcvad from the `webrtcvad-wheels` distribution; the contributed hook asks
# for the metadata of `webrtcvad` (not installed) and fails. This hook takes its place.
from PyInstaller.utils.hooks import copy_metadata

datas = copy_metadata("webrtcvad-wheels")
