"""CTranslate2's Transformers converter against the installed transformers: which keyword names the
weights' dtype in from_pretrained, and a converter that passes the one transformers takes
(tools/bench/bench_vs_ct2.py converts its checkpoint through it). Stdlib only: its test
(tests/bench/ct2_compat_test.py) runs where neither ctranslate2 nor transformers is installed.

TransformersConverter._load (ctranslate2/converters/transformers.py) calls
self.load_model(model_class, path, **kwargs), kwargs holding the dtype:
  - CTranslate2 <= 4.6.2 passes torch_dtype=, 4.6.3 and later pass dtype= (read in the wheels of
    4.6.0, 4.6.1, 4.6.2, 4.6.3, 4.7.0, 4.8.5);
  - transformers takes dtype= since 4.56.0 and still takes torch_dtype= there ("kept for BC", in
    5.25.0 too); before 4.56 an unknown dtype= reaches the model's constructor:
    "TypeError: CodeGenForCausalLM.__init__() got an unexpected keyword argument 'dtype'"
    (CTranslate2 4.8.5 with transformers 4.40.2).
load_model is the converter's documented hook for loading, so bridged_converter overrides it to
rename the keyword; the model it loads, and the model.bin written, are the same (byte for byte,
4.40.2 against 5.25.0 on the tiny test model).
"""
import re

CT2_DTYPE_SINCE = (4, 6, 3)  # the first CTranslate2 whose converter passes dtype=
TF_DTYPE_SINCE = (4, 56, 0)  # the first transformers whose from_pretrained takes dtype=
DTYPE_KWARGS = ("dtype", "torch_dtype")
TESTED = "ctranslate2 4.8.5 with transformers 4.40.2 and 5.25.0 (torch 2.15.0)"
FIX = 'pip install "ctranslate2==4.8.5" "transformers==5.25.0"'


def parse_version(s):
    """The leading release numbers of a version string: "4.40.2" -> (4, 40, 2), "5.0.0rc1" ->
    (5, 0, 0), "2.15.0+cpu" -> (2, 15, 0), "4.57.0.dev0" -> (4, 57, 0). ValueError when it has none."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(s))
    if not m:
        raise ValueError(f"cannot read a version number from {s!r}")
    return tuple(int(x) for x in m.group(1).split("."))


def converter_kwarg(ct2_version):
    """The keyword CTranslate2 ct2_version's converter passes the dtype as."""
    return "dtype" if parse_version(ct2_version) >= CT2_DTYPE_SINCE else "torch_dtype"


def transformers_kwarg(tf_version):
    """The keyword transformers tf_version's from_pretrained is given the dtype as (see the module doc)."""
    return "dtype" if parse_version(tf_version) >= TF_DTYPE_SINCE else "torch_dtype"


def plan(ct2_version, tf_version):
    """(passes, takes, note): the keyword the converter passes, the one bridged_converter hands
    transformers, and a line for the log saying which and why."""
    passes, takes = converter_kwarg(ct2_version), transformers_kwarg(tf_version)
    if passes == takes:
        note = f"CTranslate2 {ct2_version} passes {passes}=, which transformers {tf_version} takes"
    elif passes == "dtype":
        note = (f"CTranslate2 {ct2_version} passes dtype=, which transformers {tf_version} does not take "
                f"(it came in 4.56.0): renamed to torch_dtype=")
    else:
        note = (f"CTranslate2 {ct2_version} passes torch_dtype=, which transformers {tf_version} deprecates "
                f"(dtype= since 4.56.0): renamed to dtype=")
    return passes, takes, note


def rename_dtype(kwargs, takes):
    """kwargs with its dtype keyword (dtype= or torch_dtype=) renamed to takes; a new dict."""
    if takes not in DTYPE_KWARGS:
        raise ValueError(f"takes must be one of {DTYPE_KWARGS}, got {takes!r}")
    out = dict(kwargs)
    for k in DTYPE_KWARGS:
        if k != takes and k in out:
            v = out.pop(k)
            if out.get(takes) is not None and v is not None and out[takes] != v:
                raise ValueError(f"both {k}={v!r} and {takes}={out[takes]!r} given")
            if out.get(takes) is None:
                out[takes] = v
    return out


def bridged_converter(base, tf_version):
    """A subclass of base (ctranslate2.converters.TransformersConverter) whose load_model hands
    from_pretrained the dtype under the keyword transformers tf_version takes. ValueError when base
    has no load_model to override (then the keyword cannot be changed from outside)."""
    if not callable(getattr(base, "load_model", None)):
        raise ValueError(f"{base.__name__} has no load_model method to pass the dtype keyword through")
    takes = transformers_kwarg(tf_version)

    class Bridged(base):
        def load_model(self, model_class, model_name_or_path, **kwargs):
            return super().load_model(model_class, model_name_or_path, **rename_dtype(kwargs, takes))

    Bridged.__name__ = Bridged.__qualname__ = f"Bridged{base.__name__}"
    return Bridged
