"""The Python module on the GPU: a cuda Network infers and trains as the reference backend does
(numpy in, numpy out), runs from and into CUDA arrays through DLPack (PyTorch's tensors, where
PyTorch is there), and trains over a dataset folder and an image folder through train(). Every
test is skipped, with the engine's reason, where there is no GPU or no cuda backend."""
import os
import unittest

import numpy as np

import trident
from helpers import TestCase, ramp, temp_dir

FASHION_MNIST = os.environ.get("TRIDENT_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")


def cuda_unavailable():
    """None where a cuda network compiles, else the engine's sentence saying why not."""
    try:
        trident.Network(trident.Model.zoo("fmnist_cnn"), device="cuda", batch=1)
        return None
    except trident.Error as e:
        return str(e)


REASON = cuda_unavailable()


def torch_cuda():
    """PyTorch where it is installed and sees the GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def relative_error(got, want):
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-12))


@unittest.skipIf(REASON is not None, f"no GPU: {REASON}")
class Cuda(TestCase):
    def test_inference_matches_the_reference_backend(self):
        model = trident.Model.zoo("resnet_cifar")
        gpu = trident.Network(model, device="cuda", batch=8, seed=3)
        ref = trident.Network(model, device="cpu_ref", batch=8, seed=3)
        self.assertEqual(gpu.backend, "cuda")
        x = ramp(gpu.input_shape, 0.25)
        self.assertLess(relative_error(gpu.infer(x), ref.infer(x)), 2e-3)
        nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        np.testing.assert_array_equal(gpu.infer(nhwc, layout="nhwc"), gpu.infer(x))

    def test_training_steps_match_the_reference_backend(self):
        model = trident.Model.zoo("fmnist_cnn")
        nets = [trident.Network(model, mode="training", device=d, batch=16, seed=5, learning_rate=0.01)
                for d in ("cuda", "cpu_ref")]
        x = ramp(nets[0].input_shape, 0.5)
        labels = np.arange(16, dtype=np.int64) % 10
        losses = [[n.train_step(x, labels) for _ in range(4)] for n in nets]
        for got, want in zip(*losses):
            self.assertAlmostEqual(got, want, delta=2e-3 * abs(want))
        self.assertLess(losses[0][-1], losses[0][0])
        self.assertLess(relative_error(nets[0].infer(x), nets[1].infer(x)), 1e-2)

    def test_mixed_precision_training_lowers_the_loss(self):
        for precision in ("fp16", "bf16"):
            with self.subTest(precision=precision):
                net = trident.Network(trident.Model.zoo("resnet_cifar"), mode="training", device="cuda",
                                      precision=precision, batch=16, learning_rate=0.02)
                x = ramp(net.input_shape, 1.0)
                labels = np.arange(16, dtype=np.int32) % 10
                losses = [net.train_step(x, labels) for _ in range(20)]
                self.assertTrue(all(np.isfinite(losses)), losses)
                # fp32 on the CPU goes from 2.43 to 1.48 in 12 steps; fp16 may skip its first
                # steps while the loss scale comes down.
                self.assertLess(np.mean(losses[-3:]), 0.75 * losses[0], losses)

    def test_device_arrays_through_dlpack(self):
        torch = torch_cuda()
        if torch is None:
            self.skipTest("PyTorch with a GPU is not installed")
        net = trident.Network(trident.Model.zoo("resnet_cifar"), device="cuda", batch=4, seed=7)
        x = torch.from_numpy(ramp((4, 32, 32, 3), 0.75)).cuda()  # NHWC, as infer_device takes
        out = torch.full(tuple(net.output_shape), float("nan"), device="cuda")
        net.infer_device(x, out)
        want = net.infer(x.permute(0, 3, 1, 2).contiguous().cpu().numpy())
        self.assertLess(relative_error(out.cpu().numpy(), want), 1e-5)
        self.assert_error(lambda: net.infer_device(x[:2], out), "images")

    @unittest.skipUnless(os.path.isdir(FASHION_MNIST), "no Fashion-MNIST (TRIDENT_FASHION_MNIST)")
    def test_train_over_a_dataset_folder(self):
        net = trident.Network(trident.Model.zoo("fmnist_cnn"), mode="training", device="cuda", batch=64,
                              learning_rate=0.05)
        result = net.train(FASHION_MNIST, epochs=2, train_limit=4096, test_limit=1024)
        self.assertEqual([e["epoch"] for e in result["epochs"]], [1, 2])
        self.assertEqual(result["test_images"], 1024)
        self.assertGreater(result["test_accuracy"], 0.6)

    def test_train_over_an_image_folder(self):
        try:
            from PIL import Image
        except ImportError:
            self.skipTest("Pillow is not installed")
        root = temp_dir(self)
        rng = np.random.default_rng(1)
        for split, count in (("train", 96), ("val", 32)):
            for label, level in (("dark", 40), ("light", 215)):
                folder = os.path.join(root, split, label)
                os.makedirs(folder)
                for i in range(count // 2):
                    pixels = np.clip(rng.normal(level, 20, (36, 36, 3)), 0, 255).astype(np.uint8)
                    Image.fromarray(pixels).save(os.path.join(folder, f"{i}.png"))
        # 48 steps: evaluation uses the running statistics, which need about 40 at momentum 0.1
        # (after 12, a network that classifies its training batches perfectly evaluates at chance).
        model = trident.Model.zoo("resnet_cifar", classes=2)
        net = trident.Network(model, mode="training", device="cuda", precision="fp16", batch=8, learning_rate=0.05)
        result = net.train(root, epochs=4, image_size=32, workers=2)
        self.assertEqual(len(result["epochs"]), 4)
        self.assertEqual(result["test_images"], 32)
        self.assertGreater(result["test_accuracy"], 0.8)


if __name__ == "__main__":
    unittest.main()
