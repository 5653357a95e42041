"""trident.Network's inference from Python: its output equals `trident infer`'s on the same
weights and the same .npy input, NCHW and NHWC arrays give the same logits, any number of images
runs a batch at a time, probabilities are softmax rows, and an array that is float32 but not
contiguous is taken as it is, a plan cache keeps the CPU's timed choices, and int8 inference
calibrates on the images it is given."""
import os
import subprocess
import unittest

import numpy as np

import trident
from helpers import TestCase, ramp, temp_dir, trident_binary


class Inference(TestCase):
    def setUp(self):
        self.net = trident.Network(trident.Model.zoo("fmnist_cnn"), device="cpu_ref", batch=3, seed=7)
        self.x = ramp(self.net.input_shape)

    def test_shapes_and_properties(self):
        self.assertEqual(self.net.input_shape, [3, 1, 28, 28])
        self.assertEqual(self.net.output_shape, [3, 10])
        self.assertEqual((self.net.backend, self.net.mode, self.net.batch), ("cpu_ref", "inference", 3))
        self.assertEqual(self.net.notices, [])
        names = [m["name"] for m in trident.Model.zoo_models()]
        self.assertIn("fmnist_cnn", names)
        self.assertIn("resnet18", names)

    def test_equals_the_command_line_on_the_same_weights(self):
        d = temp_dir(self)
        weights, x_path, y_path = (os.path.join(d, f) for f in ("w.safetensors", "x.npy", "y.npy"))
        self.net.save_weights(weights)
        np.save(x_path, self.x)
        subprocess.run([trident_binary(), "infer", "--model", "fmnist_cnn", "--weights", weights, "--input", x_path,
                        "--output", y_path, "--device", "cpu_ref", "--iterations", "1", "--warmup", "0"],
                       check=True, capture_output=True)
        expected = np.load(y_path)
        y = self.net.infer(self.x)
        self.assertEqual((y.dtype, y.shape), (np.float32, (3, 10)))
        np.testing.assert_array_equal(y, expected)  # the same kernels on the same bytes: bit for bit
        self.assertFalse(np.array_equal(y[0], y[1]), "rows of different images should differ")

    def test_layouts_and_strided_arrays_give_the_same_logits(self):
        y = self.net.infer(self.x)
        nhwc = np.ascontiguousarray(self.x.transpose(0, 2, 3, 1))
        np.testing.assert_array_equal(self.net.infer(nhwc, layout="nhwc"), y)
        wide = np.zeros((3, 1, 28, 56), np.float32)
        wide[..., ::2] = self.x
        strided = wide[..., ::2]  # the same images in a view that is not C-contiguous
        self.assertFalse(strided.flags.c_contiguous)
        np.testing.assert_array_equal(self.net.infer(strided), y)

    def test_any_number_of_images_runs_a_batch_at_a_time(self):
        y = self.net.infer(self.x)
        seven = np.concatenate([self.x, self.x, self.x[:1]])
        out = self.net.infer(seven)
        self.assertEqual(out.shape, (7, 10))
        np.testing.assert_array_equal(out, np.concatenate([y, y, y[:1]]))
        np.testing.assert_array_equal(self.net.infer(self.x[1:2]), y[1:2])
        self.assertEqual(self.net.probabilities(seven).shape, (7, 10))
        with self.assertRaisesRegex(trident.Error, r"the images are \[2,1,28,27\]"):
            self.net.infer(np.zeros((2, 1, 28, 27), np.float32))

    def test_probabilities_are_softmax_rows(self):
        y = self.net.infer(self.x)
        p = self.net.probabilities(self.x)
        np.testing.assert_allclose(p.sum(axis=1), np.ones(3), atol=1e-5)
        e = np.exp(y.astype(np.float64) - y.max(axis=1, keepdims=True))
        np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)

    def test_seed_changes_the_weights(self):
        other = trident.Network(trident.Model.zoo("fmnist_cnn"), device="cpu_ref", batch=3, seed=8)
        self.assertFalse(np.array_equal(other.infer(self.x), self.net.infer(self.x)))


    def test_int8_calibrates_on_the_given_images(self):
        model = trident.Model.zoo("resnet_cifar")
        f32 = trident.Network(model, batch=4, seed=5)
        calibration = ramp([64, 3, 32, 32])
        int8 = trident.Network(model, batch=4, seed=5, precision="int8", calibration=calibration,
                               calibrator="percentile")
        self.assertIn("calibrated on 64 images (percentile)", int8.notices[0])
        x = ramp(f32.input_shape) * 0.7
        want, got = f32.infer(x), int8.infer(x)
        self.assertFalse(np.array_equal(got, want), "nothing was quantized")
        self.assertLessEqual(np.abs(got - want).max(), 0.1 * np.abs(want).max())
        with self.assertRaisesRegex(trident.Error, "float32 NCHW array"):
            trident.Network(model, batch=4, precision="int8", calibration=calibration.astype(np.float64))
        with self.assertRaisesRegex(trident.Error, "calibration_images"):
            trident.Network(model, batch=4, precision="int8")

    def test_plan_cache_keeps_the_cpu_choices_for_the_next_compile(self):
        d = temp_dir(self)
        model = trident.Model.zoo("resnet_cifar")
        first = trident.Network(model, device="cpu", batch=2, plan_cache=d)
        plans = [f for f in os.listdir(d) if f.startswith("cpu-") and f.endswith(".plans")]
        if not plans:
            self.skipTest("oneDNN offers one implementation per convolution here: nothing was timed")
        written = os.path.join(d, plans[0])
        with open(written) as f:
            self.assertEqual(f.readline().rstrip("\n"), "trident cpu plans 1")
        second = trident.Network(model, device="cpu", batch=2, plan_cache=d)
        x = ramp(first.input_shape)
        np.testing.assert_allclose(second.infer(x), first.infer(x), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    unittest.main()
