"""What the Python module's tests share: a deterministic batch that is not constant (so a wrong
layout or a dropped row shows), a fresh temporary folder, and the check that a call raises
trident.Error whose message is one sentence naming what was wrong."""
import os
import tempfile
import unittest

import numpy as np

import trident


def ramp(shape, phase=0.0):
    n = int(np.prod(shape))
    return np.sin(0.37 * np.arange(n, dtype=np.float32) + phase).reshape(shape).astype(np.float32)


def temp_dir(test):
    d = tempfile.TemporaryDirectory(prefix="trident_python_")
    test.addCleanup(d.cleanup)
    return d.name


class TestCase(unittest.TestCase):
    def assert_error(self, f, *parts):
        """That f() raises trident.Error (a RuntimeError) of one line holding each of `parts`."""
        with self.assertRaises(trident.Error) as caught:
            f()
        self.assertIsInstance(caught.exception, RuntimeError)
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        self.assertTrue(message, "the error has no message")
        for p in parts:
            self.assertIn(p, message)
        return message


def trident_binary():
    return os.environ["TRIDENT_BINARY"]
