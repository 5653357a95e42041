"""trident.Network from several Python threads: the first calls of two threads in a fresh process
(NumPy's C API is fetched when the module is imported, not by whichever call comes first with the
GIL released), and one Network shared by threads, whose calls run one at a time and so give each
thread the results it would get alone."""
import os
import subprocess
import sys
import threading
import unittest

import numpy as np

import trident
from helpers import TestCase, ramp


FIRST_CALLS = """
import threading, numpy as np, trident
nets = [trident.Network(trident.Model.zoo("fmnist_cnn"), device="cpu_ref", batch=2) for _ in range(2)]
x = np.zeros((2, 1, 28, 28), np.float32)
threads = [threading.Thread(target=n.infer, args=(x,)) for n in nets]
for t in threads: t.start()
for t in threads: t.join()
print("done")
"""


class Threads(TestCase):
    def test_first_calls_from_two_threads_do_not_deadlock(self):
        for _ in range(3):
            r = subprocess.run([sys.executable, "-c", FIRST_CALLS], capture_output=True, text=True, timeout=120,
                               env=dict(os.environ))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), "done")

    def test_a_shared_network_gives_each_thread_its_own_results(self):
        net = trident.Network(trident.Model.zoo("fmnist_cnn"), device="cpu_ref", batch=2, seed=3)
        inputs = [ramp(net.input_shape, phase=float(k)) for k in range(6)]
        want = [net.infer(x) for x in inputs]
        wrong, errors = [], []

        def run(k):
            try:
                for _ in range(10):
                    if not np.array_equal(net.infer(inputs[k]), want[k]):
                        wrong.append(k)
            except Exception as e:  # a failure in a thread fails the test below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(wrong, [], "a thread got another thread's results")


if __name__ == "__main__":
    unittest.main()
