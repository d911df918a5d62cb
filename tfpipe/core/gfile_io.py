"""File objects over tf.io.gfile that speak Python's file protocol and raise OSError, not TensorFlow errors."""

from __future__ import annotations

import errno
import io

from tfpipe.core.paths import store_name


def as_os_error(error: Exception, path: str) -> OSError:
    """A TensorFlow file error as an OSError (errno, one-line reason, the path)."""
    import tensorflow as tf

    code = (errno.ENOENT if isinstance(error, tf.errors.NotFoundError) else
            errno.EACCES if isinstance(error, (tf.errors.PermissionDeniedError, tf.errors.UnauthenticatedError)) else
            errno.EEXIST if isinstance(error, tf.errors.AlreadyExistsError) else errno.EIO)
    text = getattr(error, "message", "") or str(error)
    reason = {errno.ENOENT: "No such file or directory", errno.EACCES: "Permission denied"}.get(code)
    detail = text.strip().splitlines()[0][:200] if text.strip() else type(error).__name__
    return OSError(code, f"{reason} ({store_name(path)})" if reason and code == errno.ENOENT else
                   f"{reason or 'I/O error'} ({store_name(path)}: {detail})", path)


class GFileIO(io.RawIOBase):
    """A GFile whose TensorFlow errors come out as OSError naming the path."""

    def __init__(self, f, path: str):
        super().__init__()
        self._f, self._path, self._size = f, path, None

    def _call(self, name: str, *args):
        import tensorflow as tf

        try:
            return getattr(self._f, name)(*args)
        except tf.errors.OpError as e:
            raise as_os_error(e, self._path) from None

    def readable(self) -> bool:
        return "r" in self._f.mode

    def writable(self) -> bool:
        return "r" not in self._f.mode

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        # Never past the end: tensorflow-io's S3 reader mishandles a read that starts at the end of
        # an object (HTTP 416: it reads a failed response's body, which crashed the process), so
        # a read is cut to what is left, and nothing is asked at the end.
        if self._size is None:
            self._size = self._call("size")
        left = max(self._size - self.tell(), 0)
        size = left if size is None or size < 0 else min(size, left)
        return self._call("read", size) if size else b""

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def write(self, data) -> int:
        self._call("write", bytes(data))
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        self._call("seek", offset, whence)
        return self.tell()

    def tell(self) -> int:
        return self._call("tell")

    def close(self) -> None:
        if not self.closed:
            try:
                self._call("close")  # an object store uploads here: its errors must not be lost
            finally:
                super().close()

    def __exit__(self, exc_type, *rest) -> None:
        if exc_type is not None and self.writable():
            # An object store uploads at close: a write that failed half-way must not upload what it
            # has under the final name. Dropped unclosed, the file is discarded, never uploaded.
            self._f._writable_file = None  # pylint: disable=protected-access
            io.RawIOBase.close(self)
            return
        self.close()


class TextWriter(io.StringIO):
    """Text written to a remote file, encoded and uploaded in one write when closed."""

    def __init__(self, raw: GFileIO, encoding: str):
        super().__init__()
        self._raw, self._encoding = raw, encoding

    def close(self) -> None:
        if not self.closed:
            text = self.getvalue()
            super().close()
            with self._raw:
                self._raw.write(text.encode(self._encoding))
