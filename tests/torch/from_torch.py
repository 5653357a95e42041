#!/usr/bin/env python3
"""trident.Model.from_torch and the Python API on what a PyTorch user has: torchvision's modules
exported through from_torch keep every BatchNorm and Dropout, infer PyTorch's eval logits, and train
step for step as torch.optim.SGD trains the module itself (the same weights, batch and settings:
batch norm in training mode, momentum, weight decay); the module comes back untouched; a folder of
images trains through Network.train, evaluates, and its weights go back into torchvision with
load_state_dict(strict=True) giving trident's logits. Exit 77 (skipped) where torch, torchvision or
the trident module (built for this interpreter) cannot be imported.

    PYTHONPATH=build/python python3 tests/torch/from_torch.py OUT_DIR
"""
import os
import sys
import unittest

from torch_checks import load_state_dict, save_state_dict  # exits 77 (skipped) without torch, torchvision

import numpy as np
import torch
import torchvision

try:
    import trident
except ImportError as e:
    print(f"skipped: the trident module does not import here ({e}); build it for this Python")
    sys.exit(77)

OUT = sys.argv.pop(1) if len(sys.argv) > 1 else "from_torch_out"
# The devices that train: TRIDENT_TEST_DEVICES=cpu_ref,cuda on a GPU machine; the image folder's
# network runs on the last of them.
DEVICES = os.environ.get("TRIDENT_TEST_DEVICES", "cpu_ref,cpu").split(",")


def randomised(model, seed=0):
    """`model` with every batch norm's statistics and affine drawn at random, in eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model.eval()


def scale_error(got, want):
    return float(np.abs(got - want).max()) / max(float(np.abs(want).max()), 1e-6)


class FromTorch(unittest.TestCase):
    def test_resnet_keeps_its_batch_norms_and_infers_pytorchs_logits(self):
        torch.manual_seed(0)
        module = randomised(torchvision.models.resnet18(num_classes=10))
        x = torch.randn(4, 3, 64, 64)
        before = {k: v.clone() for k, v in module.state_dict().items()}
        model = trident.Model.from_torch(module, x)
        self.assertFalse(module.training, "the module's mode is given back")
        for k, v in module.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), f"{k} changed")
        net = trident.Network(model, batch=4)
        self.assertEqual(net.notices, [])
        with torch.no_grad():
            want = module(x).numpy()
        self.assertLess(scale_error(net.infer(x.numpy()), want), 1e-4)

    def test_training_steps_match_torch_sgd(self):
        # Batch norm in training mode, weight decay: the loss of the batch before and after one SGD
        # step, and the weights after it, as torch.optim.SGD gives them for the module itself. (Later
        # steps drift apart by rounding alone: an activation within rounding of ReLU's kink goes one
        # way in one engine and the other way in the other, and the gradients follow.)
        torch.manual_seed(1)
        module = randomised(torchvision.models.resnet18(num_classes=5))
        x, labels = torch.randn(8, 3, 32, 32), torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])
        model = trident.Model.from_torch(module, x)
        module.train()
        sgd = torch.optim.SGD(module.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
        theirs, stepped = [], None
        for _ in range(2):
            sgd.zero_grad()
            loss = torch.nn.functional.cross_entropy(module(x), labels)
            loss.backward()
            sgd.step()
            theirs.append(loss.item())
            stepped = stepped or {k: v.detach().clone() for k, v in module.state_dict().items()}
        for device in DEVICES:
            net = trident.Network(model, mode="training", batch=8, learning_rate=0.02, momentum=0.9, weight_decay=5e-4,
                                  device=device)
            ours = [net.train_step(x.numpy(), labels.numpy())]
            path = os.path.join(OUT, f"one_step_{device}.safetensors")
            net.export_state_dict(path)
            ours.append(net.train_step(x.numpy(), labels.numpy()))
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, err_msg=device)
            state = load_state_dict(path)
            self.assertEqual(int(state["bn1.num_batches_tracked"]), 1, "one step tracked one batch")
            for name, want in stepped.items():
                if want.dtype.is_floating_point:
                    err = (state[name] - want).abs().max().item() / max(want.abs().max().item(), 1e-6)
                    self.assertLess(err, 1e-4, f"{device}: {name} after one step")

    def test_dropout_and_stochastic_depth_come_along(self):
        # MobileNet v3's in-place Dropout and EfficientNet's stochastic depth: exported in training
        # mode, trained as dropout (the loss of one batch varies with the step's masks), the
        # identity in inference (PyTorch's eval logits).
        for name in ("mobilenet_v3_small", "efficientnet_b0"):
            torch.manual_seed(2)
            module = randomised(getattr(torchvision.models, name)(num_classes=4))
            x, labels = torch.randn(2, 3, 64, 64), torch.tensor([0, 1])
            model = trident.Model.from_torch(module, x, os.path.join(OUT, name + ".onnx"))
            with torch.no_grad():
                want = module(x).numpy()
            self.assertLess(scale_error(trident.Network(model, batch=2).infer(x.numpy()), want), 1e-4, name)
            net = trident.Network(model, mode="training", batch=2, learning_rate=1e-9, weight_decay=0.0, momentum=0.0)
            losses = [net.train_step(x.numpy(), labels.numpy()) for _ in range(4)]
            self.assertGreater(len(set(losses)), 1, f"{name}: the same loss every step: no dropout trained")

    def test_a_non_tensor_example_is_a_type_error(self):
        with self.assertRaises(TypeError):
            trident.Model.from_torch(torchvision.models.resnet18(), [1, 2, 3])
        with self.assertRaises(TypeError):
            trident.Model.from_torch("resnet18", torch.randn(1, 3, 32, 32))

    def test_an_image_folder_trains_and_goes_back_into_torchvision(self):
        # A torchvision model for 3 classes, fine-tuned from a 1000-class state dict (its classifier
        # skipped), trained on a folder of PNGs, evaluated, exported as a state dict that torchvision
        # loads strictly and that gives trident's logits.
        from PIL import Image
        folder = os.path.join(OUT, "folder")
        rng = np.random.default_rng(3)
        for split, per_class in (("train", 8), ("val", 4)):
            for c in range(3):
                os.makedirs(os.path.join(folder, split, f"class{c}"), exist_ok=True)
                for i in range(per_class):
                    pixels = (rng.random((40, 40, 3)) * 60 + c * 80).astype(np.uint8)
                    Image.fromarray(pixels).save(os.path.join(folder, split, f"class{c}", f"{i}.png"))
        with open(os.path.join(folder, "train", "class0", "notes.txt"), "w") as f:
            f.write("not an image")
        torch.manual_seed(4)
        pretrained = randomised(torchvision.models.resnet18(num_classes=1000))
        weights = os.path.join(OUT, "pretrained.safetensors")
        save_state_dict(pretrained.state_dict(), weights)
        module = torchvision.models.resnet18(num_classes=3).eval()
        model = trident.Model.from_torch(module, torch.randn(2, 3, 32, 32))
        net = trident.Network(model, mode="training", batch=4, learning_rate=0.01, device=DEVICES[-1])
        with self.assertRaisesRegex(trident.Error, r"fc\.(bias|weight) .*skip_mismatched"):
            net.load_weights(weights)
        skipped = net.load_weights(weights, skip_mismatched=True)
        self.assertEqual(sorted(s.split()[0] for s in skipped), ["fc.bias", "fc.weight"])
        loaded = os.path.join(OUT, "loaded.safetensors")
        net.export_state_dict(loaded)
        for name, value in load_state_dict(loaded).items():
            if not name.startswith("fc."):
                self.assertTrue(torch.equal(value, pretrained.state_dict()[name].to(value.dtype)), name)
        epochs = []
        result = net.train(folder, epochs=2, on_epoch=epochs.append)
        self.assertEqual([e["epoch"] for e in epochs], [1, 2])
        self.assertEqual(result["eval_split"], "val")
        self.assertEqual(result["test_images"], 12)
        self.assertIn("notes.txt", result["epochs"][0]["skipped"])
        evaluated = net.evaluate(folder)
        self.assertEqual(evaluated["images"], 12)
        self.assertAlmostEqual(evaluated["accuracy"], result["test_accuracy"])
        state = os.path.join(OUT, "trained.safetensors")
        net.export_state_dict(state)
        trained = torchvision.models.resnet18(num_classes=3).eval()
        trained.load_state_dict(load_state_dict(state), strict=True)
        x = torch.randn(4, 3, 32, 32)
        with torch.no_grad():
            want = trained(x).numpy()
        self.assertLess(scale_error(net.infer(x.numpy()), want), 1e-4)
        onnx_path = os.path.join(OUT, "trained.onnx")
        net.export_onnx(onnx_path)
        again = trident.Network(trident.Model.onnx(onnx_path), batch=4)
        self.assertLess(scale_error(again.infer(x.numpy()), want), 1e-4)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    unittest.main()
