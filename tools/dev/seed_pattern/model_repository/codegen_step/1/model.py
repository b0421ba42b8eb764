"""Baseline (b), the step model: one stateless HF CodeGenForCausalLM forward per Triton call.

input_ids [batch, T] and, after the first call, past_key_values [n_layer, 2, batch, n_head, past, head_dim]
come in as Triton tensors; logits [batch, T, vocab] and present_key_values (past + T positions) go out.
Nothing survives between calls: this is the deployment issue 15 reproduces, not a way to serve.
forward_ms times model(...) alone; execute_ms the whole execute() (numpy -> torch, the forward,
torch -> numpy with the KV layers stacked into one tensor), so the caller can split its step time.
"""
import json
import os
import re
import sys
import time


def _params(args):
    cfg = json.loads(args["model_config"])
    p = {k: os.path.expandvars(v["string_value"]) for k, v in cfg.get("parameters", {}).items()}
    return {k: "" if re.fullmatch(r"\$\{?\w+\}?", v) else v for k, v in p.items()}  # unset $VAR: empty


def _extend_path(extra=""):
    # The stub's embedded Python (the system's libpython3.X) does not put PYTHONPATH on sys.path, and
    # imports this file before the backend's utilities (which need numpy): PYTHONPATH first (the
    # Triton venv's numpy 1.x: the utilities mis-read string tensors with numpy 2), then torch and
    # transformers from the python_path parameter or $SEED_PYTHONPATH (tools/dev/seed_pattern/setup.sh).
    for d in reversed([x for v in (os.environ.get("PYTHONPATH", ""), extra, os.environ.get("SEED_PYTHONPATH", ""))
                       for x in v.split(os.pathsep)]):
        if d and d not in sys.path:
            sys.path.insert(0, d)


_extend_path()


class TritonPythonModel:
    def initialize(self, args):
        p = _params(args)
        _extend_path(p.get("python_path") or "")
        import triton_python_backend_utils as pb_utils
        try:
            import torch
            from transformers import CodeGenForCausalLM, DynamicCache
        except ImportError as e:
            raise pb_utils.TritonModelException(
                "codegen_step needs torch and transformers: %s (set the python_path parameter or $SEED_PYTHONPATH "
                "to the site-packages that has them; tools/dev/seed_pattern/setup.sh prints it)" % e)
        if not p.get("model") or not os.path.isfile(os.path.join(p["model"], "config.json")):
            raise pb_utils.TritonModelException("codegen_step: parameter model (or $SEED_MODEL) must be an HF CodeGen "
                                                "checkpoint directory with config.json, got %r" % p.get("model"))
        self.pb, self.torch, self.Cache = pb_utils, torch, DynamicCache
        if p.get("threads"):
            torch.set_num_threads(int(p["threads"]))
        self.dev = p.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = CodeGenForCausalLM.from_pretrained(p["model"], dtype=torch.float32).to(self.dev).eval()
        import inspect
        # transformers 5.x renames past_key_values -> cache; pass whichever forward takes
        fw = inspect.signature(self.model.forward).parameters
        self.cache_kw = "cache" if "cache" in fw else "past_key_values"

    def execute(self, requests):
        pb, torch = self.pb, self.torch
        out = []
        for req in requests:
            t0 = time.perf_counter()
            try:
                ids = torch.from_numpy(pb.get_input_tensor_by_name(req, "input_ids").as_numpy()).to(self.dev)
                pt = pb.get_input_tensor_by_name(req, "past_key_values")
                kw = {}
                if pt is not None:
                    kv = torch.from_numpy(pt.as_numpy()).to(self.dev)
                    if kv.dim() != 6 or kv.shape[0] != len(self.model.transformer.h) or kv.shape[1] != 2:
                        raise ValueError("past_key_values must be [n_layer=%d, 2, batch, n_head, past, head_dim], got %s"
                                         % (len(self.model.transformer.h), list(kv.shape)))
                    kw[self.cache_kw] = self.Cache(ddp_cache_data=[(kv[i, 0], kv[i, 1]) for i in range(kv.shape[0])])
                with torch.inference_mode():
                    t1 = time.perf_counter()
                    o = self.model(input_ids=ids, use_cache=True, **kw)
                    if self.dev != "cpu":
                        torch.cuda.synchronize()
                    t2 = time.perf_counter()
                    cache = getattr(o, "past_key_values", None) or getattr(o, "cache", None)
                    present = torch.stack([torch.stack([l.keys, l.values]) for l in cache.layers]).cpu().numpy()
                    logits = o.logits.float().cpu().numpy()
                ex = (time.perf_counter() - t0) * 1e3
                import numpy as np
                out.append(pb.InferenceResponse(output_tensors=[
                    pb.Tensor("logits", logits), pb.Tensor("present_key_values", present),
                    pb.Tensor("forward_ms", np.array([(t2 - t1) * 1e3])), pb.Tensor("execute_ms", np.array([ex]))]))
            except Exception as e:
                out.append(pb.InferenceResponse(error=pb.TritonError("codegen_step: %s: %s" % (type(e).__name__, e))))
        return out
