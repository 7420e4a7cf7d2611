//! The tokenizer a GGUF file carries, built as a `tokenizers` crate byte-level BPE tokenizer
//! from its metadata (`tokenizer.ggml.*`: tokens, merges, token types, special ids, and the
//! pre-tokenizer's name), and its chat template applied with a real Jinja engine.

use std::path::Path;

use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

use crate::error::{Error, Result};
use crate::gguf::{Gguf, Value};

/// llama.cpp's token types (`llama_token_type`): 3 marks control tokens (`<|im_start|>`),
/// matched whole in text and skipped when decoding without special tokens; 4 user-defined
/// tokens, matched whole.
const CONTROL: i64 = 3;
const USER_DEFINED: i64 = 4;
/// An ordinary token (`LLAMA_TOKEN_TYPE_NORMAL`).
const NORMAL: i64 = 1;
/// Tokens that end a generation wherever a vocabulary has them (llama.cpp's
/// `llama-vocab.cpp` collects the same spellings into its end-of-generation set).
const END_OF_GENERATION: [&str; 10] = [
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<end_of_turn>",
    "<|return|>",
    "<EOT>",
    "</s>",
];
/// Steps (minijinja's fuel: about one a template instruction) a chat template may take to
/// render: SmolLM2's takes ~50 a message, so a conversation of 10⁵ messages fits.
const TEMPLATE_FUEL: u64 = 10_000_000;

/// A GGUF model's tokenizer and its special ids.
pub struct GgufTokenizer {
    /// The `tokenizers` tokenizer.
    pub tokenizer: Tokenizer,
    /// Beginning-of-sequence id, if the file names one.
    pub bos: Option<u32>,
    /// End-of-sequence id.
    pub eos: Option<u32>,
    /// Every id that ends a generation, as llama.cpp's vocabulary collects them
    /// (`special_eog_ids`): the EOS, `tokenizer.ggml.eot_token_id` and `eom_token_id`, and
    /// the tokens spelled as a chat format's end of turn or text ([`END_OF_GENERATION`]), so
    /// that a ChatML model that ends its turn with `<|im_end|>` stops there even where the
    /// file names `<|endoftext|>` (or nothing) as its EOS.
    pub end_of_generation: Vec<u32>,
    /// Whether a BOS token starts every encoded text (`tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
    /// The Jinja chat template, if the file has one.
    pub chat_template: Option<String>,
}

fn err(path: &Path, message: impl Into<String>) -> Error {
    Error::Tokenizer {
        path: path.into(),
        message: message.into(),
    }
}

/// A GGUF value's type with its article ("an INT32", "a UINT32", "a STRING").
fn a_type(v: &Value) -> String {
    let name = v.type_name();
    let article = if name.starts_with(['A', 'E', 'I', 'O']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {name}")
}

fn strings<'a>(g: &'a Gguf, key: &str) -> Result<Vec<&'a str>> {
    let values = g
        .get(key)
        .ok_or_else(|| err(g.path(), format!("no {key} in the metadata")))?
        .as_array()
        .ok_or_else(|| err(g.path(), format!("{key} is not an array")))?;
    values
        .iter()
        .map(|v| {
            v.as_str()
                .ok_or_else(|| err(g.path(), format!("{key} holds {}", a_type(v))))
        })
        .collect()
}

fn optional_id(g: &Gguf, key: &str, vocab: usize) -> Result<Option<u32>> {
    match g.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(id) if (id as usize) < vocab => Ok(Some(id as u32)),
            _ => Err(err(
                g.path(),
                format!("{key} = {v:?} is not a token id below {vocab}"),
            )),
        },
    }
}

impl GgufTokenizer {
    /// Builds the tokenizer from `g`'s metadata. Ridge runs `tokenizer.ggml.model = gpt2`
    /// (byte-level BPE) with the pre-tokenizers `gpt2`/`default` (the GPT-2 split) and
    /// `smollm` (each digit split off first, then the GPT-2 split), as llama.cpp's
    /// `llama-vocab.cpp` defines them.
    ///
    /// Errors: [`Error::Tokenizer`] naming the key for a missing or malformed entry, merges
    /// that name tokens not in the vocabulary, or an id out of range;
    /// [`Error::Unsupported`] for another tokenizer model or pre-tokenizer.
    pub fn from_gguf(g: &Gguf) -> Result<Self> {
        let path = g.path();
        let model = g
            .get("tokenizer.ggml.model")
            .and_then(Value::as_str)
            .ok_or_else(|| err(path, "no tokenizer.ggml.model in the metadata"))?;
        if model != "gpt2" {
            return Err(Error::Unsupported {
                path: path.into(),
                message: format!("tokenizer model {model:?} (Ridge runs byte-level BPE, \"gpt2\")"),
            });
        }
        let pre = g
            .get("tokenizer.ggml.pre")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let split_digits = match pre {
            "default" | "gpt2" => false,
            "smollm" => true,
            other => {
                return Err(Error::Unsupported {
                    path: path.into(),
                    message: format!(
                        "pre-tokenizer {other:?} (Ridge runs \"gpt2\", \"default\" and \"smollm\")"
                    ),
                });
            }
        };
        let tokens = strings(g, "tokenizer.ggml.tokens")?;
        let vocab: tokenizers::models::bpe::Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), i as u32))
            .collect();
        if vocab.len() != tokens.len() {
            return Err(err(path, "tokenizer.ggml.tokens holds a token twice"));
        }
        let merges = strings(g, "tokenizer.ggml.merges")?
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let (a, b) = m
                    .split_once(' ')
                    .ok_or_else(|| err(path, format!("merge {i} {m:?} is not two tokens")))?;
                Ok((a.to_string(), b.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        let chat_template = g.get("tokenizer.chat_template").and_then(Value::as_str);
        let types: Vec<i64> = match g.get("tokenizer.ggml.token_type") {
            Some(Value::Array(v)) => v
                .iter()
                .map(|t| match t {
                    Value::I32(x) => Ok(*x as i64),
                    other => Err(err(
                        path,
                        format!("tokenizer.ggml.token_type holds {}", a_type(other)),
                    )),
                })
                .collect::<Result<_>>()?,
            Some(_) => return Err(err(path, "tokenizer.ggml.token_type is not an array")),
            // Without types, the tokens the chat template writes as markers (`<|im_start|>`)
            // are its control tokens: tokenized as text, they would hand the model a garbled
            // conversation.
            None => {
                let template = chat_template.unwrap_or("");
                tokens
                    .iter()
                    .map(|t| {
                        let marker = t.len() > 2
                            && t.starts_with('<')
                            && t.ends_with('>')
                            && !t.contains(char::is_whitespace);
                        if marker && (template.contains(t) || END_OF_GENERATION.contains(t)) {
                            CONTROL
                        } else {
                            NORMAL
                        }
                    })
                    .collect()
            }
        };
        if types.len() != tokens.len() {
            return Err(err(
                path,
                format!("{} token types for {} tokens", types.len(), tokens.len()),
            ));
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| err(path, format!("BPE: {e}")))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let byte_level = ByteLevel::new(false, true, true);
        let pre_tokenizer: PreTokenizerWrapper = if split_digits {
            Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
        } else {
            byte_level.into()
        };
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
        tokenizer.with_decoder(Some(ByteLevel::default()));
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t == CONTROL || **t == USER_DEFINED)
            .map(|(tok, t)| AddedToken::from(tok.to_string(), *t == CONTROL))
            .collect();
        tokenizer.add_special_tokens(&special);
        let n = tokens.len();
        let eos = optional_id(g, "tokenizer.ggml.eos_token_id", n)?;
        let mut end_of_generation: Vec<u32> = [
            eos,
            optional_id(g, "tokenizer.ggml.eot_token_id", n)?,
            optional_id(g, "tokenizer.ggml.eom_token_id", n)?,
        ]
        .into_iter()
        .flatten()
        .chain(
            tokens
                .iter()
                .enumerate()
                .filter(|(_, t)| END_OF_GENERATION.contains(t))
                .map(|(i, _)| i as u32),
        )
        .collect();
        end_of_generation.sort_unstable();
        end_of_generation.dedup();
        Ok(Self {
            tokenizer,
            bos: optional_id(g, "tokenizer.ggml.bos_token_id", n)?,
            eos,
            end_of_generation,
            add_bos: matches!(
                g.get("tokenizer.ggml.add_bos_token"),
                Some(Value::Bool(true))
            ),
            chat_template: chat_template.map(str::to_string),
        })
    }

    /// Token ids of `text`, control tokens written in it matched whole, with BOS first when
    /// the model adds one.
    ///
    /// Errors: [`Error::Tokenizer`] when the tokenizer fails.
    pub fn encode(&self, text: &str, path: &Path) -> Result<Vec<u32>> {
        let enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| err(path, e.to_string()))?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if self.add_bos
            && let Some(bos) = self.bos
        {
            ids.push(bos);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// The text of `ids`, special tokens skipped when `skip_special`.
    ///
    /// Errors: [`Error::Tokenizer`] when an id is not in the vocabulary.
    pub fn decode(&self, ids: &[u32], skip_special: bool, path: &Path) -> Result<String> {
        self.tokenizer
            .decode(ids, skip_special)
            .map_err(|e| err(path, e.to_string()))
    }
}

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// What was said.
    pub content: String,
}

impl Message {
    /// A turn by `role`.
    pub fn new(role: &str, content: &str) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// Renders a Hugging Face chat template (Jinja) over `messages`, as `transformers`'
/// `apply_chat_template` does: `messages`, `add_generation_prompt`, `bos_token`,
/// `eos_token` and `raise_exception` in scope, Python string methods available.
///
/// Errors: [`Error::Input`] for an empty conversation or a role other than system, user and
/// assistant; [`Error::Tokenizer`] (naming `path`) for a template that does not parse or
/// raises.
pub fn apply_chat_template(
    template: &str,
    messages: &[Message],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
    path: &Path,
) -> Result<String> {
    if messages.is_empty() {
        return Err(Error::Input(
            "a conversation needs at least one message".into(),
        ));
    }
    if let Some(m) = messages
        .iter()
        .find(|m| !matches!(m.role.as_str(), "system" | "user" | "assistant"))
    {
        return Err(Error::Input(format!(
            "message role {:?} is not system, user or assistant",
            m.role
        )));
    }
    let mut env = minijinja::Environment::new();
    // A template's loops are bounded by the work they may do: a file's template is code from
    // its author, and two nested loops over 10⁵ would otherwise render for hours.
    env.set_fuel(Some(TEMPLATE_FUEL));
    minijinja_contrib::add_to_environment(&mut env);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                msg,
            ))
        },
    );
    let tmpl_err = |e: minijinja::Error| match e.kind() {
        minijinja::ErrorKind::OutOfFuel => err(
            path,
            format!(
                "chat template: rendering took more than {TEMPLATE_FUEL} steps (a template whose loops do not end with the conversation)"
            ),
        ),
        _ => err(path, format!("chat template: {e}")),
    };
    env.add_template("chat", template).map_err(tmpl_err)?;
    let text = env
        .get_template("chat")
        .map_err(tmpl_err)?
        .render(minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => bos_token,
            eos_token => eos_token,
        })
        .map_err(tmpl_err)?;
    // A template that leaves a message out would let the model answer something else than
    // what was asked, without a word.
    if let Some(m) = messages.iter().find(|m| !text.contains(m.content.trim())) {
        return Err(err(
            path,
            format!(
                "chat template: the rendered prompt leaves out the {} message {:?}",
                m.role, m.content
            ),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::FileBytes;
    use crate::gguf::Writer;

    const TEMPLATE: &str =
        "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}";

    /// A byte-level BPE vocabulary of ChatML's markers and two letters, with `extra`
    /// metadata.
    fn tokenizer(extra: Vec<(&str, Value)>) -> Result<GgufTokenizer> {
        let tokens = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "a", "b"];
        let mut w = Writer::new()
            .meta("tokenizer.ggml.model", Value::String("gpt2".into()))
            .meta(
                "tokenizer.ggml.tokens",
                Value::Array(
                    tokens
                        .iter()
                        .map(|t| Value::String(t.to_string()))
                        .collect(),
                ),
            )
            .meta("tokenizer.ggml.merges", Value::Array(Vec::new()))
            .meta("tokenizer.chat_template", Value::String(TEMPLATE.into()));
        for (k, v) in extra {
            w = w.meta(k, v);
        }
        let g = Gguf::parse(FileBytes::from_bytes(Path::new("t.gguf"), w.finish())).unwrap();
        GgufTokenizer::from_gguf(&g)
    }

    /// A file without `tokenizer.ggml.token_type` (llama.cpp's converters write it; other
    /// writers may not): the markers its chat template writes are control tokens, matched
    /// whole, not seven text tokens each that would garble the conversation.
    #[test]
    fn a_templates_markers_are_control_tokens_without_token_types() {
        let t = tokenizer(Vec::new()).unwrap();
        let ids = t
            .encode("<|im_start|>ab<|im_end|>", Path::new("t"))
            .unwrap();
        assert_eq!(ids, vec![0, 3, 4, 1]);
        assert_eq!(t.decode(&ids, true, Path::new("t")).unwrap(), "ab");
    }

    /// Generation ends at every end-of-turn or end-of-text token, whatever the file names
    /// as its EOS (a ChatML model ends its turn with `<|im_end|>` where a file may name
    /// `<|endoftext|>` or nothing: it would run on into a made-up user turn).
    #[test]
    fn every_end_of_generation_token_ends_it() {
        let none = tokenizer(Vec::new()).unwrap();
        assert_eq!(none.eos, None);
        assert_eq!(none.end_of_generation, vec![1, 2]);
        let eos_text = tokenizer(vec![("tokenizer.ggml.eos_token_id", Value::U32(2))]).unwrap();
        assert_eq!(eos_text.eos, Some(2));
        assert_eq!(eos_text.end_of_generation, vec![1, 2]);
        let eot = tokenizer(vec![("tokenizer.ggml.eot_token_id", Value::U32(4))]).unwrap();
        assert_eq!(eot.end_of_generation, vec![1, 2, 4]);
    }

    /// A template's loops cannot render for hours: two nested loops of 10⁵ run out of fuel
    /// with an error that says so; a conversation of ordinary length renders.
    #[test]
    fn a_runaway_template_is_stopped() {
        let messages = vec![Message::new("user", "Hi")];
        let path = Path::new("t.gguf");
        let nested = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ messages[0].content }}";
        let e = apply_chat_template(nested, &messages, true, "", "", path)
            .unwrap_err()
            .to_string();
        assert!(e.contains("took more than"), "{e}");
        let long: Vec<Message> = (0..1000)
            .map(|i| Message::new(if i % 2 == 0 { "user" } else { "assistant" }, "Hi there"))
            .collect();
        assert!(apply_chat_template(TEMPLATE, &long, true, "", "", path).is_ok());
    }
}
