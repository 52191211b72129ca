"""Make the `exported` corpus: today's models, as today's tools write them, at tiny sizes.

Run by `make exported-models` in a virtual environment of its own with `requirements.txt` beside
this file (torch, transformers, scikit-learn and skl2onnx are no dependency of ditox-ci): it writes
every model with one recorded input set into `ditox_ci/data/exported/<name>/` (ONNX's backend-test
layout) and the manifest `ditox_ci/data/exported/manifest.yml` with each file's size and sha256.
The models are committed; this script is how they were made, and makes the same bytes again with
the same pins (seeded weights, seeded inputs, seeded calibration data).

- transformer blocks (random weights, hidden size 32, one layer) from Hugging Face transformers'
  own model code: a BERT encoder, a GPT-2 decoder, a LLaMA decoder (RMSNorm, rotary embeddings,
  grouped-query attention, SwiGLU), the LLaMA decoder's next-token step with its KV cache; each
  through torch's TorchScript exporter (opset 14, LayerNorm spelled out) and its dynamo exporter
  (opset 18, what `torch.onnx.export` does by default today);
- models quantized by ONNX Runtime's own tool from float ones here: a small CNN statically, in QDQ
  and QOperator form (calibrated on seeded images), the BERT encoder dynamically, and the LLaMA
  decoder's MatMuls to 4-bit blocks (MatMulNBits);
- float16 models made by ONNX Runtime's converter (onnxruntime.transformers.float16), inputs and
  outputs kept float32: the CNN and the BERT encoder, with their Cast islands;
- classic ML pipelines by skl2onnx (ai.onnx.ml): a scaler and a logistic regression whose ZipMap
  returns a sequence of maps, a random forest, a column transformer over strings and numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import torch
import yaml
from onnx import numpy_helper

SEED = 20261128
HIDDEN = 32
VOCAB = 64
SEQUENCE = 8
OUT = Path(__file__).resolve().parents[2] / "ditox_ci" / "data" / "exported"
MANIFEST = "manifest.yml"


def _versions() -> dict[str, str]:
    import onnxruntime
    import skl2onnx
    import sklearn
    import transformers

    return {
        "torch": torch.__version__.split("+")[0],
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "scikit-learn": sklearn.__version__,
        "skl2onnx": skl2onnx.__version__,
    }


class Written:
    """The models written so far, for the manifest."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.entries: list[dict[str, object]] = []

    def model(
        self, name: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], family: str, made_by: str
    ) -> Path:
        """`out/name/model.onnx` and its one recorded input set, in the graph's input order."""
        folder = self.out / name
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "test_data_set_0").mkdir(parents=True)
        onnx.checker.check_model(model)
        opsets = sorted(model.opset_import, key=lambda opset: opset.domain)  # skl2onnx's order is a set's
        del model.opset_import[:]
        model.opset_import.extend(opsets)
        model.doc_string = f"{name}: {made_by} (ditox-ci's exported corpus)"
        path = folder / "model.onnx"
        onnx.save(model, str(path))
        initializers = {tensor.name for tensor in model.graph.initializer}
        inputs = [value.name for value in model.graph.input if value.name not in initializers]
        for index, input_name in enumerate(inputs):
            tensor = numpy_helper.from_array(feeds[input_name], input_name)
            (folder / "test_data_set_0" / f"input_{index}.pb").write_bytes(tensor.SerializeToString())
        data = path.read_bytes()
        self.entries.append(
            {
                "name": name,
                "family": family,
                "made_by": made_by,
                "opset": next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        return path


# --- transformers ------------------------------------------------------------------------------


class Wrapper(torch.nn.Module):
    """A Hugging Face model behind plain tensor inputs and outputs (what the exporters take)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.eval()


class Logits(Wrapper):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def _bert() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    bert = BertModel(config).eval()

    class Encoder(Wrapper):
        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state, out.pooler_output

    ids = torch.randint(0, VOCAB, (2, SEQUENCE))
    mask = torch.ones(2, SEQUENCE, dtype=torch.int64)
    mask[1, -3:] = 0  # the second sequence is padded
    segments = torch.zeros(2, SEQUENCE, dtype=torch.int64)
    segments[:, SEQUENCE // 2 :] = 1
    names = ["input_ids", "attention_mask", "token_type_ids"]
    return Encoder(bert), (ids, mask, segments), names, ["last_hidden_state", "pooler_output"]


def _gpt2() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=1, n_head=4, n_positions=32, attn_implementation="eager"
    )
    gpt2 = GPT2LMHeadModel(config).eval()

    ids = torch.randint(0, VOCAB, (1, SEQUENCE))
    return (
        Logits(gpt2),
        (ids, torch.ones(1, SEQUENCE, dtype=torch.int64)),
        ["input_ids", "attention_mask"],
        ["logits"],
    )


def _llama_config():  # type: ignore[no-untyped-def]
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="eager",
    )


def _llama() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]:
    from transformers import LlamaForCausalLM

    llama = LlamaForCausalLM(_llama_config()).eval()

    ids = torch.randint(0, VOCAB, (1, SEQUENCE))
    return (
        Logits(llama),
        (ids, torch.ones(1, SEQUENCE, dtype=torch.int64)),
        ["input_ids", "attention_mask"],
        ["logits"],
    )


def _llama_step() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]:
    """The decoder's next token with a KV cache of 5 tokens: past keys and values in, present out."""
    from transformers import DynamicCache, LlamaForCausalLM

    config = _llama_config()
    llama = LlamaForCausalLM(config).eval()

    class Step(Wrapper):
        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            past_key: torch.Tensor,
            past_value: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            cache = DynamicCache(config=config)
            cache.update(past_key, past_value, 0)
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True
            )
            layer = out.past_key_values.layers[0]
            return out.logits, layer.keys, layer.values

    past = 5
    head = HIDDEN // config.num_attention_heads
    args = (
        torch.randint(0, VOCAB, (1, 1)),
        torch.ones(1, past + 1, dtype=torch.int64),
        torch.randn(1, config.num_key_value_heads, past, head),
        torch.randn(1, config.num_key_value_heads, past, head),
    )
    names = ["input_ids", "attention_mask", "past_key", "past_value"]
    return Step(llama), args, names, ["logits", "present_key", "present_value"]


def _export(
    module: torch.nn.Module,
    args: tuple[torch.Tensor, ...],
    inputs: list[str],
    outputs: list[str],
    dynamo: bool,
) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as folder, torch.no_grad():
        path = str(Path(folder) / "model.onnx")
        if dynamo:
            program = torch.onnx.export(
                module, args, input_names=inputs, output_names=outputs, dynamo=True, opset_version=18
            )
            program.save(path)
        else:
            torch.onnx.export(
                module, args, path, input_names=inputs, output_names=outputs, opset_version=14, dynamo=False
            )
        return onnx.load(path)


def _sorted(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph's nodes in an order where each comes after what it reads (the fp16 converter appends
    its input casts at the end, which the checker refuses)."""
    made = {value.name for value in model.graph.input} | {tensor.name for tensor in model.graph.initializer}
    pending, order = list(model.graph.node), []
    while pending:
        ready = [node for node in pending if all(not name or name in made for name in node.input)]
        if not ready:
            raise ValueError("the graph has a cycle")
        for node in ready:
            order.append(node)
            made.update(node.output)
        pending = [node for node in pending if all(node is not other for other in ready)]
    del model.graph.node[:]
    model.graph.node.extend(order)
    return model


def _feeds(args: tuple[torch.Tensor, ...], names: list[str]) -> dict[str, np.ndarray]:
    return {name: arg.numpy() for name, arg in zip(names, args)}


# --- a small CNN, quantized and in float16 -----------------------------------------------------


def _cnn() -> tuple[torch.nn.Module, torch.Tensor]:
    """Conv-BN-ReLU, a residual block, max pooling, global average pooling and a classifier."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Sequential(
                torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU()
            )
            self.branch = torch.nn.Sequential(
                torch.nn.Conv2d(8, 8, 3, padding=1),
                torch.nn.BatchNorm2d(8),
                torch.nn.ReLU(),
                torch.nn.Conv2d(8, 8, 3, padding=1),
            )
            self.head = torch.nn.Linear(8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            stem = self.stem(x)
            y = torch.relu(stem + self.branch(stem))
            y = torch.nn.functional.max_pool2d(y, 2)
            return self.head(y.mean(dim=(2, 3)))

    block = Block()
    for module in block.modules():  # batch-norm statistics that are not the identity
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return block.eval(), torch.randn(1, 3, 16, 16)


def _detector() -> tuple[torch.nn.Module, torch.Tensor]:
    """A detector's stem and head as today's detection code writes them: YOLOv5's Focus (four strided
    slices concatenated on channels), convolutions with TensorFlow-style "same" padding (an explicit
    pad first), torchvision's FrozenBatchNorm2d (a per-channel scale and shift after the convolution),
    a bias added after a bias-free convolution (StyleGAN2's fused bias-activation), SiLU, and a linear
    layer followed by BatchNorm1d."""

    class FrozenBatchNorm(torch.nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.register_buffer("scale", torch.rand(channels) + 0.5)
            self.register_buffer("shift", torch.rand(channels) - 0.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale.reshape(1, -1, 1, 1) + self.shift.reshape(1, -1, 1, 1)

    class Detector(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.focus = torch.nn.Conv2d(12, 8, 3, padding=1, bias=False)
            self.frozen = FrozenBatchNorm(8)
            self.same = torch.nn.Conv2d(8, 8, 3, stride=2, bias=False)
            self.bias = torch.nn.Parameter(torch.rand(8) - 0.5)
            self.head = torch.nn.Linear(8, 6)
            self.norm = torch.nn.BatchNorm1d(6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)
            x = torch.nn.functional.silu(self.frozen(self.focus(x)))
            x = self.same(torch.nn.functional.pad(x, (0, 1, 0, 1))) + self.bias.reshape(1, -1, 1, 1)
            x = torch.nn.functional.silu(x)
            return self.norm(self.head(x.mean(dim=(2, 3))))

    detector = Detector()
    detector.norm.running_mean.uniform_(-0.5, 0.5)
    detector.norm.running_var.uniform_(0.5, 1.5)
    return detector.eval(), torch.randn(2, 3, 16, 16)


class _Images:
    """ORT's CalibrationDataReader over seeded images (or, with `tokens`, seeded token sequences)."""

    def __init__(self, name: str, count: int = 16, tokens: bool = False) -> None:
        rng = np.random.default_rng(SEED)
        if tokens:
            self.items = iter(
                [
                    {
                        name: rng.integers(0, VOCAB, (1, SEQUENCE)),
                        "attention_mask": np.ones((1, SEQUENCE), np.int64),
                    }
                    for _ in range(count)
                ]
            )
            return
        self.items = iter(
            [{name: rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(count)]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def _quantized(source: Path, how: Callable[[str, str], None]) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as folder:
        target = str(Path(folder) / "model.onnx")
        how(str(source), target)
        return onnx.load(target)


def _upgraded_and_fused(
    written: Written, bert: Path, feeds: dict[str, np.ndarray], versions: dict[str, str]
) -> None:
    """The TorchScript BERT as two common later steps leave it: upgraded to opset 20 by onnx's version
    converter (LayerNorm and GELU still spelled out), and fused offline by ONNX Runtime's transformer
    optimizer from the upgraded one, with its bias and embedding fusions off (SkipLayerNormalization,
    Gelu and Attention with their biases as separate Adds, the embeddings spelled out)."""
    from onnx import version_converter
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    model = version_converter.convert_version(onnx.load(str(bert)), 20)
    written.model(
        "bert-encoder-opset20",
        model,
        feeds,
        "exported/transformer",
        f"onnx {versions['onnx']} version_converter (opset 14 to 20) of bert-encoder-torchscript",
    )
    options = FusionOptions("bert")
    options.enable_bias_skip_layer_norm = False
    options.enable_bias_gelu = False
    options.enable_embed_layer_norm = False
    # from the upgraded model: its LayerNormalization fusion writes ONNX's LayerNormalization (opset 17)
    # into an opset-14 model without raising the opset, which the checker refuses
    fused = optimize_model(
        model, model_type="bert", num_heads=4, hidden_size=HIDDEN, optimization_options=options, opt_level=0
    )
    with tempfile.TemporaryDirectory() as folder:  # saving is where it declares the com.microsoft domain
        fused.save_model_to_file(str(Path(folder) / "model.onnx"))
        fused_model = onnx.load(str(Path(folder) / "model.onnx"))
    written.model(
        "bert-encoder-ort-fused",
        fused_model,
        feeds,
        "exported/transformer",
        f"onnxruntime {versions['onnxruntime']} transformers optimizer (bert, python fusions only, bias "
        "and embedding fusions off) of bert-encoder-opset20",
    )


# --- classic ML --------------------------------------------------------------------------------


def _classic(written: Written, versions: dict[str, str]) -> None:
    from skl2onnx import to_onnx
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((60, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    made_by = f"skl2onnx {versions['skl2onnx']}, scikit-learn {versions['scikit-learn']}"
    probe = x[:5]
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=200)).fit(x, y)
    model = to_onnx(pipeline, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    written.model(
        "sklearn-scaler-logistic-zipmap",
        model,
        {"X": probe},
        "exported/classic-ml",
        f"{made_by}: a scaler and a logistic regression, probabilities as a ZipMap (a sequence of maps)",
    )
    forest = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0).fit(x, y)
    model = to_onnx(forest, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options={"zipmap": False})
    written.model(
        "sklearn-random-forest",
        model,
        {"X": probe},
        "exported/classic-ml",
        f"{made_by}: a random forest (TreeEnsembleClassifier)",
    )
    colours = np.array(["red", "green", "blue"], dtype=object)[rng.integers(0, 3, 60)].reshape(-1, 1)
    columns = ColumnTransformer([("number", StandardScaler(), [0, 1]), ("colour", OneHotEncoder(), [2])])
    import pandas as pd

    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "colour": colours[:, 0]})
    mixed = make_pipeline(columns, LogisticRegression(max_iter=200)).fit(frame, y)
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    model = to_onnx(
        mixed,
        initial_types=[
            ("a", FloatTensorType([None, 1])),
            ("b", FloatTensorType([None, 1])),
            ("colour", StringTensorType([None, 1])),
        ],
        target_opset={"": 17, "ai.onnx.ml": 3},
        options={id(mixed): {"zipmap": False}},
    )
    feeds = {"a": x[:5, :1], "b": x[:5, 1:2], "colour": colours[:5]}
    written.model(
        "sklearn-columns-onehot-logistic",
        model,
        feeds,
        "exported/classic-ml",
        f"{made_by}: a column transformer (a scaler on numbers, one-hot on strings) and a logistic "
        "regression",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the corpus goes (default {OUT})")
    out = parser.parse_args().out
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    versions = _versions()
    if out.is_dir():  # a model no longer made leaves no folder behind
        for stale in out.iterdir():
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    written = Written(out)
    hf_by = f"torch {versions['torch']}, transformers {versions['transformers']}"
    torch_by = f"torch {versions['torch']}"
    exported: dict[str, Path] = {}
    feeds_of: dict[str, dict[str, np.ndarray]] = {}
    for name, make, what in (
        ("bert-encoder", _bert, "a BERT encoder layer with its embeddings and pooler"),
        ("gpt2-decoder", _gpt2, "a GPT-2 decoder layer with its LM head"),
        (
            "llama-decoder",
            _llama,
            "a LLaMA decoder layer (RMSNorm, rotary, GQA 4/2 heads, SwiGLU) with its LM head",
        ),
        ("llama-decoder-kv-cache", _llama_step, "a LLaMA decoder's next-token step with a 5-token KV cache"),
    ):
        module, args, inputs, outputs = make()
        for dynamo, form in ((False, "TorchScript exporter, opset 14"), (True, "dynamo exporter, opset 18")):
            model = _export(module, args, inputs, outputs, dynamo)
            suffix = "dynamo" if dynamo else "torchscript"
            feeds_of[name] = _feeds(args, inputs)
            path = written.model(
                f"{name}-{suffix}",
                model,
                feeds_of[name],
                "exported/transformer",
                f"{hf_by} ({form}): {what}, random weights",
            )
            exported[f"{name}-{suffix}"] = path

    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    from onnxruntime.transformers.float16 import convert_float_to_float16

    ort_by = f"onnxruntime {versions['onnxruntime']}"
    cnn, image = _cnn()
    cnn_model = _export(cnn, (image,), ["image"], ["logits"], dynamo=False)
    cnn_path = written.model(
        "cnn-resnet-block",
        cnn_model,
        {"image": image.numpy()},
        "exported/float",
        f"{torch_by} (TorchScript exporter, opset 14): a small CNN with a residual block, "
        "batch norms folded into the convolutions by the exporter",
    )
    model = _export(cnn, (image,), ["image"], ["logits"], dynamo=True)
    written.model(
        "cnn-resnet-block-dynamo",
        model,
        {"image": image.numpy()},
        "exported/float",
        f"{torch_by} (dynamo exporter, opset 18): the same CNN, batch norms kept",
    )
    detector, boxes = _detector()
    for dynamo, form in ((False, "TorchScript exporter, opset 14"), (True, "dynamo exporter, opset 18")):
        model = _export(detector, (boxes,), ["image"], ["scores"], dynamo)
        written.model(
            f"detector-stem-{'dynamo' if dynamo else 'torchscript'}",
            model,
            {"image": boxes.numpy()},
            "exported/float",
            f"{torch_by} ({form}): a detector's stem and head (YOLOv5's Focus, "
            "'same' padding, FrozenBatchNorm2d, a separate bias, SiLU, Linear and BatchNorm1d)",
        )
    for form, quant_format in (("qdq", QuantFormat.QDQ), ("qoperator", QuantFormat.QOperator)):
        model = _quantized(
            cnn_path,
            lambda source, target, quant_format=quant_format: quantize_static(
                source,
                target,
                _Images("image"),
                quant_format=quant_format,
                per_channel=True,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                reduce_range=True,
            ),
        )
        written.model(
            f"cnn-resnet-block-int8-{form}",
            model,
            {"image": image.numpy()},
            "exported/quantized",
            f"{ort_by} quantize_static ({form}, per channel, uint8 activations, 7-bit int8 weights, "
            "calibrated on 16 seeded images) of cnn-resnet-block",
        )
    model = _quantized(
        cnn_path,
        lambda source, target: quantize_static(
            source,
            target,
            _Images("image"),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            extra_options={"QDQKeepRemovableActivations": True},
        ),
    )
    written.model(
        "cnn-resnet-block-int8-qdq-s8",
        model,
        {"image": image.numpy()},
        "exported/quantized",
        f"{ort_by} quantize_static (qdq, int8 activations and weights, activations' Relu kept, "
        "calibrated on 16 seeded images) of cnn-resnet-block",
    )
    bert_feeds = feeds_of["bert-encoder"]
    model = _quantized(
        exported["bert-encoder-torchscript"],
        lambda source, target: quantize_dynamic(source, target, weight_type=QuantType.QInt8),
    )
    written.model(
        "bert-encoder-int8-dynamic",
        model,
        bert_feeds,
        "exported/quantized",
        f"{ort_by} quantize_dynamic (int8 weights) of bert-encoder-torchscript",
    )
    model = _quantized(
        exported["gpt2-decoder-torchscript"],
        lambda source, target: quantize_static(
            source,
            target,
            _Images("input_ids", 8, tokens=True),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["MatMul", "Gemm", "Where", "Softmax"],
        ),
    )
    written.model(
        "gpt2-decoder-int8-qdq",
        model,
        feeds_of["gpt2-decoder"],
        "exported/quantized",
        f"{ort_by} quantize_static (qdq, its MatMuls, Gemms, Wheres and Softmaxes; calibrated on 8 seeded "
        "token sequences) of gpt2-decoder-torchscript",
    )
    llama = onnx.load(str(exported["llama-decoder-torchscript"]))
    quantizer = MatMulNBitsQuantizer(llama, block_size=16, is_symmetric=True)
    quantizer.process()
    written.model(
        "llama-decoder-int4",
        quantizer.model.model,
        feeds_of["llama-decoder"],
        "exported/quantized",
        f"{ort_by} MatMulNBitsQuantizer (4 bits, blocks of 16) of llama-decoder-torchscript",
    )
    quantizer = MatMulNBitsQuantizer(
        onnx.load(str(exported["bert-encoder-torchscript"])), block_size=16, is_symmetric=True
    )
    quantizer.process()
    written.model(
        "bert-encoder-int4",
        quantizer.model.model,
        bert_feeds,
        "exported/quantized",
        f"{ort_by} MatMulNBitsQuantizer (4 bits, blocks of 16) of bert-encoder-torchscript (its "
        "biases stay Adds after the MatMulNBits)",
    )
    from onnx import version_converter

    # int4 DequantizeLinear needs opset 21, and the quantizer raises the opset without converting the
    # nodes (a ReduceMean keeps its axes attribute: an invalid model), so the converter goes first
    llama = version_converter.convert_version(onnx.load(str(exported["llama-decoder-torchscript"])), 21)
    quantizer = MatMulNBitsQuantizer(llama, block_size=16, is_symmetric=True, quant_format=QuantFormat.QDQ)
    quantizer.process()
    written.model(
        "llama-decoder-int4-qdq",
        quantizer.model.model,
        feeds_of["llama-decoder"],
        "exported/quantized",
        f"{ort_by} MatMulNBitsQuantizer (4 bits, blocks of 16, as DequantizeLinear before each MatMul) "
        "of llama-decoder-torchscript upgraded to opset 21 by onnx's version converter",
    )
    for name, source, feeds in (
        ("cnn-resnet-block", cnn_path, {"image": image.numpy()}),
        ("bert-encoder", exported["bert-encoder-torchscript"], bert_feeds),
    ):
        half = _sorted(convert_float_to_float16(onnx.load(str(source)), keep_io_types=True))
        written.model(
            f"{name}-fp16",
            half,
            feeds,
            "exported/fp16",
            f"{ort_by} convert_float_to_float16 (inputs and outputs kept float32) of {source.parent.name}",
        )
    _upgraded_and_fused(written, exported["bert-encoder-torchscript"], bert_feeds, versions)
    _classic(written, versions)
    manifest = {"made_with": versions, "models": written.entries}
    (out / MANIFEST).write_text(
        "# Written by scripts/exported-models/export.py (`make exported-models`): do not edit.\n"
        + yaml.safe_dump(manifest, sort_keys=False, width=110)
    )
    print(f"{len(written.entries)} models in {out}")


if __name__ == "__main__":
    main()
