"""Network.infer_device's DLPack side, without a GPU: a producer made with ctypes hands over
capsules in the spec's layout claiming CUDA memory, so the parsing (device, dtype, shape,
strides) and the ownership rules (each consumed capsule's deleter called once, on a refusal
too) are checked on any machine. On a CPU network the engine's own sentence comes back."""
import ctypes
import unittest

import numpy as np

import trident
from helpers import TestCase

kDLCPU, kDLCUDA = 1, 2
kDLInt, kDLFloat = 0, 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]

CAPSULE_NAME = b"dltensor"
PyCapsule_New = ctypes.pythonapi.PyCapsule_New
PyCapsule_New.restype = ctypes.py_object
PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeDeviceArray:
    """An array that says it lives on a CUDA device; its memory is host memory nobody reads."""

    def __init__(self, shape, code=kDLFloat, bits=32, strides=None, device=kDLCUDA):
        self.shape, self.code, self.bits, self.strides, self.device = shape, code, bits, strides, device
        self.deleted, self.streams, self.keep = 0, [], []
        self.host = np.zeros(int(np.prod(shape)), np.float32)

    def __dlpack_device__(self):
        return (self.device, 0)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        strides = (ctypes.c_int64 * len(self.shape))(*self.strides) if self.strides else None
        t = DLManagedTensor()
        t.dl_tensor = DLTensor(self.host.ctypes.data, DLDevice(self.device, 0), len(self.shape),
                               DLDataType(self.code, self.bits, 1), shape, strides, 0)
        t.deleter = Deleter(self._delete)
        self.keep += [shape, strides, t]
        return PyCapsule_New(ctypes.addressof(t), CAPSULE_NAME, None)

    def _delete(self, _):
        self.deleted += 1


class DLPack(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.net = trident.Network(trident.Model.zoo("fmnist_cnn"), batch=2)

    def test_cuda_arrays_are_taken_and_released(self):
        images, out = FakeDeviceArray([2, 28, 28, 1]), FakeDeviceArray([2, 10])
        # A CPU network takes no device memory: the engine's sentence, after both capsules were read.
        self.assert_error(lambda: self.net.infer_device(images, out), "infer_device", f"'{self.net.backend}' backend")
        self.assertEqual((images.deleted, out.deleted), (1, 1))
        self.assertEqual(images.streams, [1])  # CUDA's legacy default stream

    def test_refusals_release_the_capsule(self):
        out = FakeDeviceArray([2, 10])
        cases = [(FakeDeviceArray([2, 28, 28, 1], code=kDLInt), ("float32", "int32")),
                 (FakeDeviceArray([2, 28, 28, 1], bits=16), ("float32", "float16")),
                 (FakeDeviceArray([2, 1, 28, 28]), ("[2,1,28,28]", "[2,28,28,1]", "NHWC")),
                 (FakeDeviceArray([2, 28, 28, 1], strides=[1, 2, 56, 1568]), ("contiguous",))]
        for images, parts in cases:
            self.assert_error(lambda: self.net.infer_device(images, out), *parts)
            self.assertEqual(images.deleted, 1)
        self.assertEqual(out.deleted, 0)  # refused before the output was asked for
        # Compact strides given explicitly are fine, as is any stride of an axis of extent 1.
        ok = FakeDeviceArray([2, 28, 28, 1], strides=[784, 28, 1, 99])
        self.assert_error(lambda: self.net.infer_device(ok, out), f"'{self.net.backend}' backend")

    def test_host_arrays_are_refused_before_export(self):
        host = FakeDeviceArray([2, 28, 28, 1], device=kDLCPU)
        self.assert_error(lambda: self.net.infer_device(host, FakeDeviceArray([2, 10])), "the CPU", "call infer")
        self.assertEqual(host.streams, [])
        self.assert_error(lambda: self.net.infer_device(np.zeros((2, 28, 28, 1), np.float32), None), "the CPU")
        self.assert_error(lambda: self.net.infer_device([1.0], None), "__dlpack__", "list")


if __name__ == "__main__":
    unittest.main()
