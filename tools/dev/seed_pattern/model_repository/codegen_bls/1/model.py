"""Baseline (b), the loop: a decoupled BLS model that generates by calling codegen_step once per token.

Per request: tokenize (HF tokenizer of the checkpoint), then for each token one
pb_utils.InferenceRequest to codegen_step with input_ids (the whole prompt first, then the last
token) and past_key_values (the present_key_values of the previous call, taken out as numpy and
sent back in), sample the next token from the last logits in Python (greedy, or temperature with
a seeded numpy generator), detokenize and send one response with the new text. This is the
pattern issue 15 names as the problem: the KV cache crosses the Triton boundary twice per token.

Each response carries, for its token: step_ms (one loop iteration as this model sees it: the BLS
round trip, numpy <-> Triton tensors, sampling, detokenizing; not the send of the response), and codegen_step's own
forward_ms and execute_ms, and context (tokens in the KV cache sent with the step), so the
overhead step_ms - forward_ms can be plotted against context (tools/bench/bench_baselines.py).
"""
import json
import os
import re
import sys
import time


def _params(args):
    cfg = json.loads(args["model_config"])
    p = {k: os.path.expandvars(v["string_value"]) for k, v in cfg.get("parameters", {}).items()}
    return {k: "" if re.fullmatch(r"\$\{?\w+\}?", v) else v for k, v in p.items()}


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
        import numpy as np
        import triton_python_backend_utils as pb_utils
        self.np, self.pb = np, pb_utils
        try:
            from transformers import AutoTokenizer
        except ImportError as e:
            raise pb_utils.TritonModelException("codegen_bls needs transformers (for the tokenizer): %s (set the "
                                                "python_path parameter or $SEED_PYTHONPATH)" % e)
        model = p.get("model") or ""
        try:
            with open(os.path.join(model, "config.json")) as f:
                cfg = json.load(f)
            self.tok = AutoTokenizer.from_pretrained(model)
        except Exception as e:
            raise pb_utils.TritonModelException("codegen_bls: parameter model (or $SEED_MODEL) must be an HF CodeGen "
                                                "checkpoint directory with its tokenizer: %r: %s" % (model, e))
        self.eos = cfg.get("eos_token_id")
        self.n_pos = cfg.get("n_positions") or 2048
        self.step_model = p.get("step_model") or "codegen_step"

    def _scalar(self, req, name, default):
        t = self.pb.get_input_tensor_by_name(req, name)
        if t is None:
            return default
        a = t.as_numpy().reshape(-1)
        if a.size != 1:
            raise ValueError("input %s must hold one value, got %d" % (name, a.size))
        v = a[0]
        return v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v.item()

    def execute(self, requests):
        for req in requests:  # one at a time, inline: the instance is busy until the request ends
            sender = req.get_response_sender()
            try:
                self._generate(req, sender)
            except Exception as e:
                sender.send(self.pb.InferenceResponse(error=self.pb.TritonError("codegen_bls: %s: %s" % (type(e).__name__, e))),
                            flags=self.pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    def _generate(self, req, sender):
        np, pb = self.np, self.pb
        sp = self._scalar(req, "sampling_parameters", "") or "{}"
        try:
            params = json.loads(sp)
        except ValueError as e:
            raise ValueError("sampling_parameters is not JSON (%s): %r" % (e, sp[:200]))
        if not isinstance(params, dict):
            raise ValueError("sampling_parameters must be a JSON object, got %r" % sp[:200])
        temp = float(params.get("temperature") or 0.0)
        ignore_eos = bool(params.get("ignore_eos", False))
        rng = np.random.default_rng(params.get("seed"))
        max_tokens = int(self._scalar(req, "max_tokens", params.get("max_tokens", 16)))
        ids_t = pb.get_input_tensor_by_name(req, "input_ids")
        if ids_t is not None:
            ids = [int(x) for x in ids_t.as_numpy().reshape(-1)]
        else:
            text = self._scalar(req, "text_input", None)
            if text is None:
                raise ValueError("give text_input or input_ids")
            ids = self.tok(text)["input_ids"]
        if not ids or max_tokens < 1 or len(ids) + max_tokens > self.n_pos:
            raise ValueError("prompt of %d tokens + max_tokens %d must be 1..n_positions=%d" % (len(ids), max_tokens, self.n_pos))
        out_ids, sent_text = [], ""
        step_in = np.array([ids], dtype=np.int64)
        past = None  # numpy: the KV cache as the previous step returned it
        for i in range(max_tokens):
            t0 = time.perf_counter()
            inputs = [pb.Tensor("input_ids", step_in)]
            if past is not None:
                inputs.append(pb.Tensor("past_key_values", past))
            r = pb.InferenceRequest(model_name=self.step_model, inputs=inputs,
                                    requested_output_names=["logits", "present_key_values", "forward_ms", "execute_ms"]).exec()
            if r.has_error():
                raise RuntimeError("%s: %s" % (self.step_model, r.error().message()))
            logits = pb.get_output_tensor_by_name(r, "logits").as_numpy()[0, -1]
            past = pb.get_output_tensor_by_name(r, "present_key_values").as_numpy()
            fwd = float(pb.get_output_tensor_by_name(r, "forward_ms").as_numpy()[0])
            exe = float(pb.get_output_tensor_by_name(r, "execute_ms").as_numpy()[0])
            if temp > 0:
                z = logits.astype(np.float64) / temp
                z = np.exp(z - z.max())
                nxt = int(rng.choice(z.size, p=z / z.sum()))
            else:
                nxt = int(np.argmax(logits))
            out_ids.append(nxt)
            step_in = np.array([[nxt]], dtype=np.int64)
            fin = None
            if nxt == self.eos and not ignore_eos:
                fin = "stop"
            elif i + 1 == max_tokens:
                fin = "length"
            text = self.tok.decode(out_ids)
            delta = ""
            if fin or not text.endswith("\ufffd"):  # hold back a partial UTF-8 character until the end
                delta, sent_text = text[len(sent_text):], text
            ctx = len(ids) + i - 1 if i else 0  # KV positions sent in with this step
            step_ms = (time.perf_counter() - t0) * 1e3
            outs = [pb.Tensor("text_output", np.array([delta.encode()], dtype=np.object_)),
                    pb.Tensor("token_id", np.array([nxt], dtype=np.int64)),
                    pb.Tensor("step_ms", np.array([step_ms])), pb.Tensor("forward_ms", np.array([fwd])),
                    pb.Tensor("execute_ms", np.array([exe])), pb.Tensor("context", np.array([ctx], dtype=np.int64))]
            if fin:
                outs.append(pb.Tensor("finish_reason", np.array([fin.encode()], dtype=np.object_)))
                sender.send(pb.InferenceResponse(output_tensors=outs), flags=pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            sender.send(pb.InferenceResponse(output_tensors=outs))
