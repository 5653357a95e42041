"""trident.Network's training from Python: train_step lowers the loss of one batch step after
step, saved weights load back into a fresh network to the same outputs, and train() over a
dataset folder returns its epochs and test results."""
import os
import unittest

import numpy as np

import trident
from helpers import TestCase, ramp, temp_dir

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


class Training(TestCase):
    def test_train_step_lowers_the_loss(self):
        # One batch again and again at a rate it descends steadily (at 0.05 momentum makes it bounce).
        net = trident.Network(trident.Model.zoo("fmnist_cnn"), mode="training", batch=8, learning_rate=0.01)
        self.assertEqual(net.mode, "training")
        x = ramp(net.input_shape, 0.5)
        before = net.infer(x)
        losses = [net.train_step(x, np.arange(8, dtype=np.int64)) for _ in range(6)]
        self.assertAlmostEqual(losses[0], np.log(10), delta=1.0)  # freshly initialised: near guessing
        for a, b in zip(losses, losses[1:]):
            self.assertLess(b, a)
        self.assertLess(losses[-1], 0.5 * losses[0])
        self.assertFalse(np.array_equal(net.infer(x), before), "infer should run the trained weights")

    def test_adamw_lowers_the_loss_and_differs_from_sgd(self):
        # torch.optim.AdamW's defaults (rate 1e-3, weight decay 0.01) when they are left unset.
        x = ramp((8, 1, 28, 28), 0.5)
        labels = np.arange(8, dtype=np.int64)
        net = trident.Network(trident.Model.zoo("fmnist_cnn"), mode="training", batch=8, optimizer="adamw")
        losses = [net.train_step(x, labels) for _ in range(6)]
        self.assertLess(losses[-1], 0.5 * losses[0])
        sgd = trident.Network(trident.Model.zoo("fmnist_cnn"), mode="training", batch=8, learning_rate=1e-3,
                              weight_decay=0.01)
        self.assertNotEqual([sgd.train_step(x, labels) for _ in range(2)][1], losses[1])

    def test_saved_weights_load_back_to_the_same_outputs(self):
        # The reference backend, whose results do not depend on the thread count the CPU has free.
        trained = trident.Network(trident.Model.zoo("fmnist_cnn"), mode="training", device="cpu_ref", batch=4,
                                  learning_rate=0.01)
        x = ramp(trained.input_shape)
        for _ in range(2):
            trained.train_step(x, np.array([0, 1, 2, 3], dtype=np.int32))
        path = os.path.join(temp_dir(self), "trained.safetensors")
        trained.save_weights(path)
        fresh = trident.Network(trident.Model.zoo("fmnist_cnn"), device="cpu_ref", batch=4, seed=99)
        self.assertFalse(np.array_equal(fresh.infer(x), trained.infer(x)))
        fresh.load_weights(path)
        np.testing.assert_array_equal(fresh.infer(x), trained.infer(x))

    def test_deterministic_training_is_the_same_at_every_thread_count(self):
        # The cpu backend with deterministic=True: fixed-order sums, so 1 and 2 threads agree bit for bit.
        x = ramp((4, 1, 28, 28))
        labels = np.array([0, 1, 2, 3], dtype=np.int32)
        results = []
        try:
            for threads in (1, 2):
                trident.set_cpu_threads(threads, policy="fixed")
                net = trident.Network(trident.Model.zoo("fmnist_cnn"), mode="training", batch=4, learning_rate=0.01,
                                      deterministic=True)
                losses = [net.train_step(x, labels) for _ in range(3)]
                results.append((losses, net.infer(x)))
        finally:
            trident.set_cpu_threads(0, policy="fixed")
        self.assertEqual(results[0][0], results[1][0])
        np.testing.assert_array_equal(results[0][1], results[1][1])
        with self.assertRaisesRegex(trident.Error, "policy must be"):
            trident.set_cpu_threads(1, policy="sometimes")
        with self.assertRaisesRegex(trident.Error, "max_threads must be"):
            trident.set_cpu_threads(-1)

    @unittest.skipUnless(os.path.isdir(FASHION_MNIST), "no Fashion-MNIST (Debian dataset-fashion-mnist)")
    def test_train_over_a_dataset_folder(self):
        net = trident.Network(trident.Model.zoo("fmnist_cnn"), mode="training", batch=16, learning_rate=0.02)
        result = net.train(FASHION_MNIST, epochs=2, train_limit=256, test_limit=64)
        self.assertEqual([e["epoch"] for e in result["epochs"]], [1, 2])
        for e in result["epochs"]:
            self.assertEqual(set(e), {"epoch", "loss", "accuracy", "seconds", "images_per_second", "learning_rate",
                                      "data_wait_seconds", "eval_loss", "eval_accuracy", "eval_top5_accuracy",
                                      "eval_images", "skipped", "skipped_images", "decoded_by"})
            self.assertEqual(e["eval_images"], 64)
            self.assertTrue(np.isfinite(e["loss"]) and 0 <= e["accuracy"] <= 1)
        self.assertLess(result["epochs"][1]["loss"], result["epochs"][0]["loss"])
        self.assertEqual(result["test_images"], 64)
        self.assertGreater(result["test_accuracy"], 0.1)  # better than chance after 512 images


if __name__ == "__main__":
    unittest.main()
