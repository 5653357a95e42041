"""Every refusal of the Python module is a trident.Error (a RuntimeError) whose message is one
sentence naming what was wrong: bad arrays are refused before they reach the engine, and the
engine's own sentences (unknown model, unknown device, wrong mode) come through unchanged."""
import os
import unittest

import numpy as np

import trident
from helpers import TestCase, temp_dir


class Errors(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = trident.Model.zoo("fmnist_cnn")
        cls.net = trident.Network(cls.model, batch=2)

    def test_images_of_the_wrong_shape(self):
        self.assert_error(lambda: self.net.infer(np.zeros((2, 28, 28, 1), np.float32)), "[2,28,28,1]", "[2,1,28,28]",
                          "NCHW")
        self.assert_error(lambda: self.net.infer(np.zeros((1, 28, 27, 1), np.float32), layout="nhwc"),
                          "[1,28,27,1]", "[1,28,28,1]", "NHWC")
        self.assert_error(lambda: self.net.infer(np.zeros(2 * 28 * 28, np.float32)), "[1568]")

    def test_images_of_the_wrong_type(self):
        self.assert_error(lambda: self.net.infer(np.zeros((2, 1, 28, 28))), "float32", "float64", "astype")
        self.assert_error(lambda: self.net.probabilities(np.zeros((2, 1, 28, 28), np.uint8)), "uint8")
        self.assert_error(lambda: self.net.infer([[0.0]]), "NumPy array", "list")
        self.assert_error(lambda: self.net.infer(np.zeros((2, 1, 28, 28), np.float32), layout="chwn"),
                          "unknown layout 'chwn'", "nchw and nhwc")

    def test_unknown_model_device_mode_precision(self):
        self.assert_error(lambda: trident.Model.zoo("nope"), "unknown model 'nope'", "fmnist_cnn")
        self.assert_error(lambda: trident.Network(self.model, device="tpu"), "unknown device 'tpu'", "cpu_ref")
        self.assert_error(lambda: trident.Network(self.model, mode="testing"), "unknown mode 'testing'",
                          "inference and training")
        self.assert_error(lambda: trident.Network(self.model, precision="fp8"), "unknown precision 'fp8'")
        self.assert_error(lambda: trident.Network(self.model, precision="fp16"), "fp16", "cuda")
        self.assert_error(lambda: trident.Model.zoo("fmnist_cnn", height=3, width=3), "does not fit", "[1,3,3,1]")
        self.assert_error(lambda: trident.Network(self.model, batch=0), "batch")

    def test_training_arguments(self):
        net = trident.Network(self.model, mode="training", batch=2)
        x = np.zeros(net.input_shape, np.float32)
        self.assert_error(lambda: net.train_step(x, np.array([0.0, 1.0])), "int32 or int64", "float64")
        self.assert_error(lambda: net.train_step(x, np.array([0, 1, 2])), "[3]", "batch of 2")
        self.assert_error(lambda: net.train_step(x, np.array([0, 2**40])), "not a class index")
        self.assert_error(lambda: net.train_step(x, np.array([0, 10])), "label 10", "0 to 9")
        self.assert_error(lambda: self.net.train_step(x, np.array([0, 1])), "train_step", "training")
        self.assert_error(lambda: net.train(temp_dir(self)), temp_dir(self)[:5])
        self.assert_error(lambda: net.train(temp_dir(self), decode="sometimes"), "decode is 'sometimes'", "auto, gpu or cpu")
        self.assert_error(lambda: net.set_learning_rate(-1.0), "learning rate")
        self.assert_error(lambda: trident.Network(self.model, mode="training", optimizer="adam"),
                          "unknown optimizer 'adam'", "sgd and adamw")
        self.assert_error(lambda: trident.Network(self.model, mode="training", optimizer="adamw", beta1=1.0), "beta1")
        self.assert_error(lambda: trident.Network(self.model, mode="training", optimizer="adamw", eps=0.0), "eps")

    def test_weights_files(self):
        missing = os.path.join(temp_dir(self), "absent.safetensors")
        self.assert_error(lambda: self.net.load_weights(missing), missing)
        self.assert_error(lambda: self.net.save_weights(os.path.join(missing, "sub", "w.safetensors")), "w.safetensors")


if __name__ == "__main__":
    unittest.main()
