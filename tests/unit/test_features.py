"""Feature Extractor on small hand-written problems and candidates (tests/fixtures/problems)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kskill.agents.candidate_features import candidate_features
from kskill.agents.features import Features, op_family, reference_features
from kskill.agents.observations import vocabulary

PROBLEMS = Path(__file__).resolve().parents[1] / "fixtures" / "problems"
REFERENCES = ("matmul_bias_relu", "softmax", "layernorm", "conv_bn_relu", "pointwise_chain", "gemm_sum_scale",
              "attention", "cumsum_mask")


@pytest.fixture(scope="module")
def ref() -> dict[str, Features]:
    return {name: reference_features((PROBLEMS / f"{name}.py").read_text()) for name in REFERENCES}


@pytest.fixture(scope="module")
def cand() -> dict[str, Features]:
    return {name: candidate_features((PROBLEMS / f"candidate_{name}.py").read_text()) for name in ("triton", "cuda")}


def _check_vocabulary(features: Features, sources: tuple[str, ...]) -> None:
    vocab = vocabulary()
    python_type = {"number": (int, float), "bool": (bool,), "string": (str,)}
    for name, value in features.values.items():
        assert name in vocab, f"{name} is not defined in metrics.yaml"
        assert vocab[name].source in sources, f"{name} has source {vocab[name].source}"
        assert isinstance(value, python_type[vocab[name].type]), f"{name}={value!r} is not a {vocab[name].type}"
        if vocab[name].type == "number":
            assert not isinstance(value, bool), name
    for name, reason in features.unavailable.items():
        assert name in vocab and reason, name


def test_every_feature_is_a_typed_vocabulary_name(ref, cand):
    for features in ref.values():
        _check_vocabulary(features, ("static", "problem"))
    for features in cand.values():
        _check_vocabulary(features, ("static",))


def test_every_static_vocabulary_name_is_produced(ref, cand):
    produced = {n for f in [*ref.values(), *cand.values()] for n in (*f.values, *f.unavailable)}
    static = {n for n, m in vocabulary().items() if m.source == "static"}
    assert static <= produced, f"defined in metrics.yaml but never extracted: {sorted(static - produced)}"


def test_matmul_bias_relu(ref):
    v = ref["matmul_bias_relu"].values
    assert v["capture_method"] == "fx" and v["static_shapes"] is True
    assert v["has_gemm"] and v["has_contraction"] and not v["has_convolution"]
    assert (v["gemm_m"], v["gemm_n"], v["gemm_k"]) == (128, 512, 256)
    assert v["epilogue_chain_after_contraction"] == 2  # x * 2.0, relu
    assert v["max_pointwise_chain"] == 2
    assert v["est_kernel_launches"] == 3
    assert v["flops"] == 2 * 128 * 512 * 256 + 2 * 128 * 512
    assert v["input_bytes"] == 128 * 256 * 4
    assert v["parameter_bytes"] == (512 * 256 + 512) * 4
    assert v["output_numel"] == 128 * 512 and v["output_bytes"] == 128 * 512 * 4
    assert v["bytes_moved"] == v["input_bytes"] + v["parameter_bytes"] + v["output_bytes"]
    assert v["data_reuse"] > 100  # each input element feeds many multiply-adds
    assert v["input_dtypes"] == "float32"


def test_softmax(ref):
    v = ref["softmax"].values
    assert v["has_softmax"] and not v["has_reduction"] and not v["has_contraction"]
    assert v["reduction_length"] == 4096 and v["reduction_like_op_count"] == 1
    assert v["transcendental_op_count"] == 1
    assert v["bytes_moved"] == 2 * 64 * 4096 * 4


def test_layernorm(ref):
    v = ref["layernorm"].values
    assert v["has_normalization"] and not v["has_batchnorm"] and v["batchnorm_training"] is False
    assert v["reduction_length"] == 256
    assert v["parameter_bytes"] == 2 * 256 * 4


def test_conv_bn_relu_keeps_training_mode(ref):
    v = ref["conv_bn_relu"].values
    assert v["has_convolution"] and v["has_batchnorm"] and v["has_normalization"]
    assert v["batchnorm_training"] is True  # KernelBench does not call eval()
    assert v["epilogue_chain_after_contraction"] == 0  # BatchNorm sits between conv and ReLU
    assert v["reduction_length"] == 8 * 32 * 32  # batch statistics over N*H*W per channel
    assert v["flops"] > 2 * 8 * 16 * 32 * 32 * 3 * 9  # the convolution alone


def test_many_pointwise_ops_form_one_fusible_group(ref):
    v = ref["pointwise_chain"].values
    assert v["max_pointwise_chain"] == 6 and v["pointwise_op_count"] == 6
    assert v["transcendental_op_count"] == 2  # sigmoid, tanh
    assert v["eager_bytes_moved"] > 4 * v["bytes_moved"]  # what fusion saves
    assert v["data_reuse"] < 8


def test_gemm_then_column_sum_is_simplifiable(ref):
    v = ref["gemm_sum_scale"].values
    assert v["simplifiable_patterns"] == 1
    assert v["gemm_k"] == 8192 and v["gemm_mn"] == 128 * 64
    assert ref["matmul_bias_relu"].values["simplifiable_patterns"] == 0


def test_attention_written_as_matmul_softmax_matmul(ref):
    v = ref["attention"].values
    assert v["has_attention"] and v["has_softmax"] and v["gemm_op_count"] == 2
    assert v["layout_op_count"] == 1  # k.transpose
    assert ref["softmax"].values["has_attention"] is False


def test_data_dependent_control_flow_falls_back_to_source(ref):
    f = ref["cumsum_mask"]
    assert f.values["capture_method"] == "ast"
    assert f.values["has_scan"] and f.values["has_pointwise"]
    assert "flops" not in f.values and "control flow" in f.unavailable["flops"]
    assert "static_shapes" in f.unavailable


def test_reference_without_model_is_read_from_source_and_says_why():
    f = reference_features("import torch\nclass Other:\n    pass\n")
    assert f.values["capture_method"] == "ast" and f.values["op_count"] == 0
    assert "Model" in f.unavailable["flops"]


def test_triton_candidate(cand):
    v = cand["triton"].values
    assert v["code_language"] == "triton" and v["code_triton_kernels"] == 2 and v["code_cuda_kernels"] == 0
    assert v["code_uses_tl_dot"] and v["code_k_loops"] == 1 and v["code_uses_shared_memory"]
    assert v["code_transcendentals"] == 2  # tl.sigmoid, tl.exp
    assert v["code_atomics"] == 1 and v["code_where_count"] == 1
    assert v["code_eviction_hints"] and not v["code_uses_tf32"]  # input_precision="ieee"
    assert v["code_num_warps"] == 4 and v["code_num_stages"] == 3 and v["code_block_size"] == 1024
    # two kernel[grid] launches (one through a helper method) and one tensor add
    assert v["code_launches_per_forward"] == 3
    assert "code_vector_width" in cand["triton"].unavailable


def test_cuda_load_inline_candidate(cand):
    v = cand["cuda"].values
    assert v["code_language"] == "cuda" and v["code_cuda_kernels"] == 1 and v["code_triton_kernels"] == 0
    assert v["code_vector_width"] == 4 and v["code_uses_shared_memory"]
    assert v["code_uses_fast_math"] and v["code_transcendentals"] == 2  # __expf, expf
    assert v["code_atomics"] == 1 and v["code_syncthreads"] == 2 and v["code_k_loops"] == 1
    assert v["code_block_size"] == 256 and v["code_uses_tf32"]
    assert v["code_launches_per_forward"] == 2  # the extension call and .contiguous()


def test_plain_torch_candidate_counts_its_operators():
    source = (PROBLEMS / "matmul_bias_relu.py").read_text().replace("class Model(", "class ModelNew(")
    v = candidate_features(source).values
    assert v["code_language"] == "torch" and v["code_custom_kernels"] == 0
    assert v["code_launches_per_forward"] == 3  # self.fc, x * 2.0, torch.relu


def test_candidate_framework_features():
    source = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3).to(memory_format=torch.channels_last)
        self.graph = torch.cuda.CUDAGraph()
        torch.set_float32_matmul_precision("high")
        self.body = torch.compile(self.conv)

    def forward(self, x):
        return self.body(x)
'''
    v = candidate_features(source).values
    assert v["code_uses_channels_last"] and v["code_uses_cuda_graph"]
    assert v["code_uses_torch_compile"] and v["code_uses_tf32"]


def test_unparsable_candidate_is_reported_not_raised():
    f = candidate_features("def broken(:\n")
    assert not f.values and "does not parse" in f.unavailable["code_language"]


@pytest.mark.parametrize(("name", "second_tensor", "family"), [
    ("linear", False, "gemm"), ("convtranspose2d", False, "convolution"), ("batchnorm2d", False, "normalization"),
    ("log_softmax", False, "softmax"), ("maxpool2d", False, "pooling"), ("cumsum", False, "scan"),
    ("crossentropyloss", False, "loss"), ("max", False, "reduction"), ("max", True, "pointwise"),
    ("view", False, "view"), ("cat", False, "data_movement"), ("frobnicate", False, "other"),
])
def test_op_families(name, second_tensor, family):
    assert op_family(name, second_tensor) == family
