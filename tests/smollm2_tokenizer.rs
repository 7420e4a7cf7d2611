//! CPU-only: the SmolLM2 GGUF's tokenizer and chat template against transformers'
//! (`tests/fixtures/smollm2/public.json`: `tokenizer_checks`, every case's rendered prompt and
//! ids), and the GGUF reader on the real file's header, whole and mutated.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use ridge::nn::file::FileBytes;
use ridge::nn::gguf::Gguf;
use ridge::nn::llama::tokenizer::{GgufTokenizer, Message, apply_chat_template};
use ridge::nn::{LlamaConfig, fetch};
use serde_json::Value;

fn fixture() -> &'static Value {
    static FIXTURE: OnceLock<Value> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/smollm2/public.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON")
    })
}

fn gguf() -> &'static Gguf {
    static FILE: OnceLock<Gguf> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = fetch::smollm2_path();
        assert!(
            path.exists(),
            "SmolLM2-135M-Instruct is not at {}: run `cargo xtask fetch-model`",
            path.display()
        );
        Gguf::parse(FileBytes::open(&path).expect("readable")).expect("valid GGUF")
    })
}

fn tokenizer() -> &'static GgufTokenizer {
    static TOK: OnceLock<GgufTokenizer> = OnceLock::new();
    TOK.get_or_init(|| GgufTokenizer::from_gguf(gguf()).expect("tokenizer"))
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn the_real_file_reads_as_smollm2() {
    let g = gguf();
    assert_eq!(g.version, 3);
    assert_eq!(g.tensors().len(), 272);
    assert_eq!(
        LlamaConfig::from_gguf(g).unwrap(),
        LlamaConfig::smollm2_135m()
    );
    let t = g.tensor("blk.0.attn_k.weight").unwrap();
    assert_eq!((t.shape(), t.ggml_type.name), (vec![192, 576], "Q4_1"));
    assert_eq!(
        g.tensor("token_embd.weight").unwrap().ggml_type.name,
        "Q8_0"
    );
}

/// The GGUF names the `smollm` pre-tokenizer: each digit split off first, then the GPT-2
/// split (llama.cpp's `LLAMA_VOCAB_PRE_TYPE_SMOLLM`, and the original model's
/// `tokenizer.json`). transformers' GGUF loader splits digits after the GPT-2 split instead,
/// which differs where whitespace runs meet digits (`"\n\n1"`: one "\n\n" token for the model
/// as trained, two "\n" for transformers' conversion); the fixture lists both and marks the
/// strings where they disagree. Ridge tokenizes as the model was trained.
#[test]
fn tokenizer_matches_the_smollm_pre_tokenizer() {
    let tok = tokenizer();
    assert_eq!((tok.bos, tok.eos, tok.add_bos), (Some(1), Some(2), false));
    for check in fixture()["tokenizer_checks"].as_array().unwrap() {
        let text = check["text"].as_str().unwrap();
        let got = tok.encode(text, Path::new("smollm2")).unwrap();
        assert_eq!(got, ids(&check["ids_smollm_pretokenizer"]), "{text:?}");
        if check["agree"] == true {
            assert_eq!(got, ids(&check["ids"]), "{text:?}");
        }
        if check["decode_roundtrip"] == true {
            assert_eq!(tok.decode(&got, false, Path::new("smollm2")).unwrap(), text);
        }
    }
}

#[test]
fn chat_template_and_prompt_ids_match_transformers() {
    let tok = tokenizer();
    let template = tok.chat_template.as_deref().expect("a chat template");
    for case in fixture()["cases"].as_array().unwrap() {
        let text = if case["kind"] == "chat" {
            let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).unwrap();
            let rendered = apply_chat_template(
                template,
                &messages,
                true,
                "<|im_start|>",
                "<|im_end|>",
                Path::new("t"),
            )
            .unwrap();
            assert_eq!(
                rendered,
                case["prompt_text"].as_str().unwrap(),
                "{}",
                case["name"]
            );
            rendered
        } else {
            case["text"].as_str().unwrap().to_string()
        };
        let got = tok.encode(&text, Path::new("smollm2")).unwrap();
        assert_eq!(got, ids(&case["prompt_ids"]), "{}", case["name"]);
    }
}

#[test]
fn templates_refuse_what_transformers_refuses() {
    let template = tokenizer().chat_template.as_deref().unwrap();
    let p = Path::new("t");
    assert!(apply_chat_template(template, &[], true, "", "", p).is_err());
    assert!(apply_chat_template(template, &[Message::new("robot", "x")], true, "", "", p).is_err());
    let raising = "{{ raise_exception('roles must alternate') }}";
    let e =
        apply_chat_template(raising, &[Message::new("user", "x")], true, "", "", p).unwrap_err();
    assert!(e.to_string().contains("roles must alternate"), "{e}");
    assert!(
        apply_chat_template("{% for %}", &[Message::new("user", "x")], true, "", "", p).is_err()
    );
    // A template that drops the user's message is refused, not sent on without it.
    let e = apply_chat_template("   ", &[Message::new("user", "hi")], true, "", "", p).unwrap_err();
    assert!(e.to_string().contains("leaves out the user message"), "{e}");
    // Python string methods, as Hugging Face templates use them.
    let strip = "{{ messages[0]['content'].strip() }}";
    assert_eq!(
        apply_chat_template(strip, &[Message::new("user", "  hi ")], true, "", "", p).unwrap(),
        "hi"
    );
}

/// The real file's header (metadata with the tokenizer's 49,152 tokens and 48,900 merges,
/// then 272 tensor infos): every mutation of a byte is an error or a file, never a panic.
fn header() -> &'static [u8] {
    static HEADER: OnceLock<Vec<u8>> = OnceLock::new();
    HEADER.get_or_init(|| {
        let path = fetch::smollm2_path();
        let start = gguf().tensors().iter().map(|t| t.start).min().unwrap() as usize;
        std::fs::read(path).unwrap()[..start].to_vec()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn mutated_real_headers_never_panic(at in 0usize..4_000_000, byte in any::<u8>(), len in 0usize..4_000_000) {
        let mut bytes = header().to_vec();
        let n = bytes.len();
        bytes[at % n] = byte;
        bytes.truncate(len % (n + 1));
        // The tensor data is not there: a parse that gets through the header reports it
        // out of bounds; none may panic or allocate from a corrupt count.
        let _ = Gguf::parse(FileBytes::from_bytes(Path::new("m.gguf"), bytes));
    }
}
