"""Offline wav loading for shard writers: any wav soundfile reads, converted; an unreadable file is named
with the operating system's reason, not libsndfile's "System error."."""

import os

import numpy as np
import pytest

from tests.support import write_tone
from tfpipe.domains.audio import offline
from tfpipe.domains.audio.config import AudioConfig
from tfpipe.errors import DataError


def test_any_wav_is_converted_to_the_configs_mono_clip(tmp_path):
    path = write_tone(str(tmp_path / "a" / "cd.wav"), 440, seconds=0.5, sample_rate=44100, channels=2)
    notes = __import__("collections").Counter()
    clip = offline.load_clip(path, AudioConfig(clip_seconds=0.25), notes)
    assert clip.shape == (4000,) and clip.dtype == np.float32
    assert notes == {"resampled": 1, "mixed_to_mono": 1, "cropped": 1, "padded": 0}


def test_a_vanished_file_is_named_with_the_os_reason(tmp_path):
    path = str(tmp_path / "a" / "gone.wav")
    os.makedirs(os.path.dirname(path))
    os.symlink(str(tmp_path / "nowhere.wav"), path)  # listed, then gone: a dangling link
    with pytest.raises(DataError) as error:
        offline.load_clip(path, AudioConfig())
    assert f"{path}: unreadable (No such file or directory); check that it exists" in str(error.value)
    assert "System error" not in str(error.value)


def test_a_permission_denied_wav_says_so(tmp_path):
    path = write_tone(str(tmp_path / "a" / "locked.wav"), 440)
    os.chmod(path, 0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child without root's override of file permissions (this suite may run as root)
        os.close(read)
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            offline.load_clip(path, AudioConfig())
            message = "loaded"
        except BaseException as e:  # noqa: BLE001  (everything goes back to the parent)
            message = f"{type(e).__name__}: {e}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        message = f.read().decode()
    os.waitpid(pid, 0)
    assert message.startswith(f"DataError: {path}: unreadable (Permission denied); check that it exists and that its "
                              f"permissions let this user read it"), message
