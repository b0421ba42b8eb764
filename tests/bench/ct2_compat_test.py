#!/usr/bin/env python3
"""tools/bench/ct2_compat.py without ctranslate2, torch or transformers: the version reading, which dtype
keyword each side uses (the boundaries read in the wheels: CTranslate2 4.6.2 / 4.6.3, transformers
4.55.4 / 4.56.0), and the bridged converter's load_model on a stand-in for TransformersConverter
whose load_model records what it is given, as from_pretrained would receive it."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench"))
import ct2_compat  # noqa: E402


class FakeConverter:
    """TransformersConverter's shape as far as the bridge uses it: _load calls self.load_model."""

    def __init__(self, path):
        self.path = path
        self.seen = None

    def load_model(self, model_class, model_name_or_path, **kwargs):
        self.seen = (model_class, model_name_or_path, kwargs)
        return "model"

    def convert_like_ct2(self, passes):
        # what ctranslate2 4.8.5's _load does: kwargs = {"dtype": ...}; load_model(cls, path, **kwargs, config=...)
        return self.load_model("CodeGenForCausalLM", self.path, **{passes: "float32"}, config="cfg")


class Versions(unittest.TestCase):
    def test_parse(self):
        for s, v in (("4.40.2", (4, 40, 2)), ("5.0.0rc1", (5, 0, 0)), ("2.15.0+cpu", (2, 15, 0)),
                     ("4.57.0.dev0", (4, 57, 0)), ("v4.8", (4, 8)), ("10", (10,))):
            self.assertEqual(ct2_compat.parse_version(s), v, s)
        for s in ("", "dev", None):
            with self.assertRaises(ValueError, msg=repr(s)):
                ct2_compat.parse_version(s)

    def test_tuple_order_not_string_order(self):
        # "4.10" > "4.9" only as numbers; a string compare would call transformers 4.100 older than 4.56
        self.assertEqual(ct2_compat.transformers_kwarg("4.100.0"), "dtype")
        self.assertEqual(ct2_compat.transformers_kwarg("4.9.0"), "torch_dtype")
        self.assertEqual(ct2_compat.converter_kwarg("4.10.0"), "dtype")

    def test_boundaries(self):
        for v, k in (("3.24.0", "torch_dtype"), ("4.6.0", "torch_dtype"), ("4.6.2", "torch_dtype"),
                     ("4.6.3", "dtype"), ("4.7.0", "dtype"), ("4.8.5", "dtype"), ("5.0.0", "dtype")):
            self.assertEqual(ct2_compat.converter_kwarg(v), k, f"ctranslate2 {v}")
        for v, k in (("4.40.2", "torch_dtype"), ("4.55.4", "torch_dtype"), ("4.56.0", "dtype"),
                     ("4.57.1", "dtype"), ("5.25.0", "dtype")):
            self.assertEqual(ct2_compat.transformers_kwarg(v), k, f"transformers {v}")

    def test_plan(self):
        # issue 35: ctranslate2 4.8.5's converter against transformers 4.40 passes dtype=, which fails
        passes, takes, note = ct2_compat.plan("4.8.5", "4.40.2")
        self.assertEqual((passes, takes), ("dtype", "torch_dtype"))
        self.assertIn("renamed to torch_dtype=", note)
        self.assertIn("4.8.5", note)
        self.assertIn("4.40.2", note)
        self.assertEqual(ct2_compat.plan("4.8.5", "5.25.0")[:2], ("dtype", "dtype"))
        self.assertNotIn("renamed", ct2_compat.plan("4.8.5", "5.25.0")[2])
        self.assertEqual(ct2_compat.plan("4.6.2", "4.40.2")[:2], ("torch_dtype", "torch_dtype"))
        self.assertEqual(ct2_compat.plan("4.6.2", "4.56.0")[:2], ("torch_dtype", "dtype"))
        self.assertEqual(ct2_compat.plan("4.6.3", "4.55.4")[:2], ("dtype", "torch_dtype"))


class Rename(unittest.TestCase):
    def test_rename(self):
        r = ct2_compat.rename_dtype
        self.assertEqual(r({"dtype": 1, "config": 2}, "torch_dtype"), {"torch_dtype": 1, "config": 2})
        self.assertEqual(r({"torch_dtype": 1}, "dtype"), {"dtype": 1})
        self.assertEqual(r({"dtype": 1}, "dtype"), {"dtype": 1})
        self.assertEqual(r({"config": 2}, "dtype"), {"config": 2})
        self.assertEqual(r({"dtype": None}, "torch_dtype"), {"torch_dtype": None})  # config without a dtype
        self.assertEqual(r({"dtype": 1, "torch_dtype": 1}, "dtype"), {"dtype": 1})
        kw = {"dtype": 1}
        r(kw, "torch_dtype")
        self.assertEqual(kw, {"dtype": 1}, "rename_dtype changed its argument")
        with self.assertRaises(ValueError):
            r({"dtype": 1, "torch_dtype": 2}, "dtype")
        with self.assertRaises(ValueError):
            r({"dtype": 1}, "dtypes")


class Bridge(unittest.TestCase):
    def test_old_transformers_gets_torch_dtype(self):
        conv = ct2_compat.bridged_converter(FakeConverter, "4.40.2")("/m")
        self.assertTrue(isinstance(conv, FakeConverter))
        self.assertEqual(conv.convert_like_ct2("dtype"), "model")
        self.assertEqual(conv.seen, ("CodeGenForCausalLM", "/m", {"torch_dtype": "float32", "config": "cfg"}))

    def test_new_transformers_gets_dtype(self):
        for passes in ("dtype", "torch_dtype"):
            conv = ct2_compat.bridged_converter(FakeConverter, "5.25.0")("/m")
            conv.convert_like_ct2(passes)
            self.assertEqual(conv.seen[2], {"dtype": "float32", "config": "cfg"}, passes)

    def test_base_untouched(self):
        ct2_compat.bridged_converter(FakeConverter, "4.40.2")
        conv = FakeConverter("/m")
        conv.convert_like_ct2("dtype")
        self.assertEqual(conv.seen[2], {"dtype": "float32", "config": "cfg"})

    def test_no_hook(self):
        class NoHook:
            pass
        with self.assertRaises(ValueError) as e:
            ct2_compat.bridged_converter(NoHook, "4.40.2")
        self.assertIn("load_model", str(e.exception))

    def test_no_heavy_imports(self):
        for mod in ("ctranslate2", "torch", "transformers"):
            self.assertNotIn(mod, sys.modules, f"tools/bench/ct2_compat.py imported {mod}")


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
