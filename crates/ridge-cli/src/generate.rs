//! `ridge generate` and `ridge chat`: text from a GGUF decoder (SmolLM2-135M-Instruct by
//! default), streamed as it is made.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use ridge_core::{Context, DType};
use ridge_nn::{
    Finish, GenerateOptions, KvCache, Message, Sampling, Session, Stats, TextGenerator, fetch,
};

#[derive(clap::Args, Clone)]
pub struct ModelArgs {
    /// A GGUF file of a Llama-architecture model with Q8_0, Q4_0 or Q4_1 linear weights.
    /// Default: SmolLM2-135M-Instruct from the cache folder (`ridge fetch-model --model
    /// smollm2` puts it there).
    #[arg(long, value_name = "FILE.gguf")]
    model: Option<PathBuf>,
    /// Activations and KV cache in f16 (f32 accumulation; needs `shader-f16`): half the
    /// cache's memory; logits within 0.15 of f32.
    #[arg(long)]
    f16: bool,
}

impl ModelArgs {
    fn path(&self) -> Result<PathBuf, String> {
        match &self.model {
            Some(p) if p.is_dir() => Err(format!(
                "{} is a folder: --model takes a GGUF file",
                p.display()
            )),
            Some(p) => Ok(p.clone()),
            None => {
                let p = fetch::smollm2_path();
                if p.exists() {
                    let dir = p.parent().unwrap_or(&p);
                    fetch::verify(&fetch::SMOLLM2, dir).map_err(|e| e.to_string())?;
                    Ok(p)
                } else {
                    Err(format!(
                        "SmolLM2-135M-Instruct is not in the cache ({}): run `ridge fetch-model \
                         --model smollm2` or `cargo xtask fetch-model`, or pass --model FILE.gguf",
                        p.display()
                    ))
                }
            }
        }
    }

    fn load(&self, ctx: &Context) -> Result<TextGenerator, Box<dyn std::error::Error>> {
        let dtype = if self.f16 { DType::F16 } else { DType::F32 };
        Ok(TextGenerator::load(ctx, &self.path()?, dtype)?)
    }
}

#[derive(clap::Args, Clone)]
pub struct SamplingArgs {
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    max_tokens: usize,
    /// Softmax temperature: 0 always takes the most likely token (greedy, the default);
    /// 0.2–1 samples, higher is more varied.
    #[arg(long, default_value_t = 0.0, value_parser = crate::non_negative, allow_negative_numbers = true)]
    temperature: f32,
    /// Sample only among the K most likely tokens (0: all).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    top_k: usize,
    /// Sample only among the most likely tokens whose probabilities add up to P (0 < P ≤ 1).
    #[arg(long, default_value_t = 1.0, value_parser = crate::probability, allow_negative_numbers = true)]
    top_p: f32,
    /// Make tokens already seen less likely (> 1) or more (< 1); 1 is off.
    #[arg(long, default_value_t = 1.0, value_parser = crate::positive, allow_negative_numbers = true)]
    repetition_penalty: f32,
    /// Seed of the sampler: the same seed and settings give the same text.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    seed: u64,
}

impl SamplingArgs {
    /// Greedy decoding reads no sampling parameter: say so rather than ignore them.
    fn warn_if_unused(&self) {
        if self.temperature == 0.0 && (self.top_k != 0 || self.top_p != 1.0 || self.seed != 0) {
            eprintln!(
                "warning: --top-k, --top-p and --seed have no effect with --temperature 0 (greedy); \
                 give a temperature above 0 to sample"
            );
        }
    }

    fn options(&self) -> Result<GenerateOptions, ridge_nn::Error> {
        let sampling = Sampling {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            repetition_penalty: self.repetition_penalty,
            seed: self.seed,
        };
        sampling.validate()?;
        Ok(GenerateOptions {
            max_tokens: self.max_tokens,
            sampling,
            ..GenerateOptions::default()
        })
    }
}

#[derive(clap::Args)]
pub struct GenerateArgs {
    /// The user's message (the chat template is applied unless --raw); `-` reads standard
    /// input.
    prompt: Option<String>,
    /// Use the prompt as it is, without the chat template.
    #[arg(long)]
    raw: bool,
    /// A system message before the prompt (the template inserts the model's default when
    /// there is none).
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["raw", "messages"])]
    system: Option<String>,
    /// A conversation: a JSON list of {"role": "system"|"user"|"assistant", "content": …}
    /// turns; the model replies to it in a new assistant turn (the template opens one).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt", "raw"])]
    messages: Option<PathBuf>,
    /// JSON Lines on stdout: {"prompt_ids"}, then {"id", "text"} per generated token (the
    /// end-of-text token too, with empty text), then the timings.
    #[arg(long)]
    json: bool,
    /// With --json: each token's K largest raw logits as [id, logit] pairs (read back and
    /// picked on the host, with the GPU sampler's draws: the same seed, the same reply).
    #[arg(long, value_name = "K", default_value_t = 0, requires = "json")]
    top_logits: usize,
    /// Generate past the end-of-sequence token (until --max-tokens).
    #[arg(long)]
    ignore_eos: bool,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    model: ModelArgs,
}

fn read_text(path: &Path) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("standard input: {e}"))?;
        return Ok(s);
    }
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn conversation(args: &GenerateArgs) -> Result<Option<Vec<Message>>, String> {
    if let Some(file) = &args.messages {
        let text = read_text(file)?;
        // Windows editors start UTF-8 files with a byte-order mark, which JSON does not allow.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let not_a_list = |why: String| {
            format!(
                "{}: not a JSON list of {{\"role\", \"content\"}} messages ({why})",
                file.display()
            )
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| not_a_list(e.to_string()))?;
        if value.is_object() {
            // One message written bare: serde's "invalid type: map" would not say the fix.
            return Err(not_a_list(
                "one object: put the messages in a list, [{…}, …]".into(),
            ));
        }
        let messages: Vec<Message> =
            serde_json::from_value(value).map_err(|e| not_a_list(e.to_string()))?;
        return Ok(Some(messages));
    }
    if args.raw {
        return Ok(None);
    }
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::new("system", system));
    }
    messages.push(Message::new("user", &prompt_text(args)?));
    Ok(Some(messages))
}

fn prompt_text(args: &GenerateArgs) -> Result<String, String> {
    let text = match args.prompt.as_deref() {
        None => {
            return Err(
                "give a prompt (or `-` to read one from standard input), or --messages FILE".into(),
            );
        }
        // A piped prompt's last line ends in a newline the user did not type as part of
        // it (`echo Hi |`): one is dropped, as llama.cpp's `--file` does.
        Some("-") => {
            let text = read_text(Path::new("-"))?;
            let trimmed = text.strip_suffix('\n').unwrap_or(&text);
            trimmed.strip_suffix('\r').unwrap_or(trimmed).to_string()
        }
        Some(p) => p.to_string(),
    };
    // A raw prompt may be a space (it is a token); a chat message must say something.
    if text.is_empty() || (!args.raw && text.trim().is_empty()) {
        return Err("the prompt is empty".into());
    }
    Ok(text)
}

/// A KV cache for the prompt and up to `max_tokens` more, within the model's context.
fn cache_for(
    ctx: &Context,
    model: &TextGenerator,
    prompt: usize,
    max_tokens: usize,
) -> Result<KvCache, Box<dyn std::error::Error>> {
    let context = model.model().config().context;
    if context < 2 {
        return Err(format!(
            "the model's context of {context} position{} leaves no room for a prompt and a reply",
            if context == 1 { "" } else { "s" }
        )
        .into());
    }
    if prompt >= context {
        return Err(format!(
            "the prompt has {prompt} tokens, but the model's context is {context} positions: \
             it must be at most {} tokens to leave room for a reply",
            context - 1
        )
        .into());
    }
    // The cache holds the prompt and each token fed back; the reply's last token is never
    // fed back, so it has one token more than the positions left.
    let room = context - prompt + 1;
    if max_tokens > room {
        eprintln!(
            "note: --max-tokens {max_tokens}: the model's context of {context} positions leaves \
             room for {room} token{} after this {prompt}-token prompt; a reply stops there",
            if room == 1 { "" } else { "s" }
        );
    }
    Ok(model.cache(ctx, prompt.saturating_add(max_tokens).min(context))?)
}

fn stats_line(s: &Stats) -> String {
    let finish = match s.finish {
        Finish::Eos => "end of text",
        Finish::Length => "--max-tokens reached",
        Finish::Context => "context full",
        Finish::Stopped => "stopped",
    };
    // Whole tokens/s from 100 up; a decimal below (a CPU driver prefills 1–10 a second).
    let rate = |r: f64| {
        if r >= 100.0 {
            format!("{r:.0} tokens/s")
        } else {
            format!("{r:.1} tokens/s")
        }
    };
    let decode = s.decode_tokens_per_s.map_or("n/a (one token)".into(), rate);
    format!(
        "{} prompt tokens, {} generated ({finish}); time to first token {:.1} ms, prefill {}, decode {decode}",
        s.prompt_tokens,
        s.generated,
        s.time_to_first_token_ms,
        rate(s.prefill_tokens_per_s),
    )
}

pub fn generate(args: GenerateArgs) -> crate::CliResult {
    let mut options = args.sampling.options()?;
    args.sampling.warn_if_unused();
    options.stop_at_eos = !args.ignore_eos;
    options.top_logits = args.top_logits;
    let messages = conversation(&args)?;
    let raw = if messages.is_none() {
        Some(prompt_text(&args)?)
    } else {
        None
    };
    let ctx = crate::context()?;
    let model = args.model.load(&ctx)?;
    let vocab = model.model().config().vocab;
    if args.top_logits > vocab {
        eprintln!(
            "note: --top-logits {}: the vocabulary has {vocab} tokens; each line lists all of them",
            args.top_logits
        );
    }
    let prompt = match (&messages, &raw) {
        (Some(m), _) => model.encode_chat(m).map_err(|e| match &args.messages {
            Some(file) => format!("{}: {e}", file.display()),
            None => e.to_string(),
        })?,
        (None, Some(text)) => model.encode(text)?,
        (None, None) => unreachable!("a prompt or a conversation"),
    };
    let mut cache = cache_for(&ctx, &model, prompt.len(), options.max_tokens)?;
    let mut out = crate::stdout();
    if args.json {
        writeln!(out, "{}", serde_json::json!({ "prompt_ids": prompt }))?;
    }
    let interrupted = interrupt_flag();
    let mut failed = None;
    let mut reply = ReplyText::new(out);
    let stats = pollster::block_on(model.generate(&ctx, &mut cache, &prompt, &options, |t| {
        let line = if args.json {
            // Serialized directly, not through a JSON `Value`: the f32 logits keep their
            // shortest exact form instead of becoming 17-digit f64s.
            #[derive(serde::Serialize)]
            struct Line<'a> {
                id: u32,
                text: &'a str,
                #[serde(skip_serializing_if = "Option::is_none")]
                top_logits: Option<&'a [(u32, f32)]>,
            }
            let line = Line {
                id: t.id,
                text: &t.text,
                top_logits: (args.top_logits > 0).then_some(t.top_logits.as_slice()),
            };
            serde_json::to_string(&line)
                .map_err(std::io::Error::other)
                .and_then(|l| writeln!(reply.out, "{l}"))
                .and_then(|_| reply.out.flush())
        } else {
            reply.write(&t.text)
        };
        if let Err(e) = line {
            failed = Some(e);
            return false;
        }
        !interrupted.swap(false, Ordering::Relaxed)
    }))?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    if args.json {
        writeln!(reply.out, "{}", serde_json::json!({ "timings": stats }))?;
    } else {
        // The reply's line ends before the statistics go to stderr, wherever it stopped.
        reply.end_line()?;
        eprintln!("{}", stats_line(&stats));
    }
    // Cut short by Ctrl-C (the only way a reply stops early here): the status a shell gives
    // a command ended by SIGINT, so a script tells a cut reply from a whole one.
    Ok(if stats.finish == Finish::Stopped {
        ExitCode::from(INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// The exit status of a command cut short by Ctrl-C: 128 + SIGINT, as shells report it.
const INTERRUPTED: u8 = 130;

/// In the conversation: a line is one user turn; `/reset` starts a new conversation,
/// `/exit` (or Ctrl-D, or Ctrl-C at the prompt) leaves; Ctrl-C stops a reply in progress, and
/// a second Ctrl-C before it stops (during a long prompt's prefill) quits at once.
#[derive(clap::Args)]
pub struct ChatArgs {
    /// The system message (default: the model's own, from its chat template).
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// Positions the conversation may fill (its KV cache; at most the model's context).
    #[arg(long, default_value_t = 4096, value_parser = crate::at_least_one, allow_negative_numbers = true)]
    context: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    model: ModelArgs,
}

pub fn chat(args: ChatArgs) -> crate::CliResult {
    let options = args.sampling.options()?;
    args.sampling.warn_if_unused();
    let ctx = crate::context()?;
    let path = args.model.path()?;
    let model = args.model.load(&ctx)?;
    let most = model.model().config().context;
    if args.context > most {
        eprintln!(
            "warning: --context {} is more than the model's {most} positions: the chat holds {most}",
            args.context
        );
    }
    let context = args.context.min(most);
    let mut session = Session::new(model.cache(&ctx, context)?);
    let interrupted = interrupt_flag();
    eprintln!(
        "{} on {}: type a message, Enter to send. Ctrl-C stops a reply, /reset starts over, /exit (or Ctrl-D, or Ctrl-C at the prompt) leaves.",
        path.file_name().map_or(path.display().to_string(), |n| n
            .to_string_lossy()
            .into_owned()),
        ctx.describe()
    );
    let start = || -> Vec<Message> {
        args.system
            .iter()
            .map(|s| Message::new("system", s))
            .collect()
    };
    let mut messages = start();
    let stdin = std::io::stdin();
    // Piped, nobody reads the refusals: a turn that could not be answered makes the exit
    // status non-zero, so a script sees it.
    let scripted = !std::io::IsTerminal::is_terminal(&stdin);
    let mut refused = 0usize;
    let mut lines = stdin.lock();
    loop {
        eprint!("> ");
        interrupted.store(false, Ordering::Relaxed);
        let bytes = match read_line(&mut lines) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                eprintln!(); // end the prompt's line at the end of input
                break;
            }
            // Ctrl-C at the prompt: leave (its flag must not stop the next reply).
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                interrupted.store(false, Ordering::Relaxed);
                eprintln!();
                break;
            }
            Err(e) => return Err(format!("standard input: {e}").into()),
        };
        let Ok(line) = String::from_utf8(bytes) else {
            eprintln!("(that line is not valid UTF-8: type it again)");
            refused += 1;
            continue;
        };
        let text = line.trim_end_matches(['\n', '\r']);
        // A command is the line's first word (`/exit now` leaves too); a line starting with
        // an unknown `/word` and more words is a message (`/usr/bin holds what?`).
        let first = text.split_whitespace().next().unwrap_or("");
        match first {
            "" => continue,
            "/exit" | "/quit" => break,
            "/reset" => {
                messages = start();
                session.clear();
                eprintln!("(a new conversation)");
                continue;
            }
            cmd if cmd.starts_with('/') && cmd == text.trim() => {
                eprintln!("(unknown command {cmd}: /reset starts over, /exit leaves)");
                continue;
            }
            _ => {}
        }
        messages.push(Message::new("user", text));
        let ids = model.encode_chat(&messages)?;
        if ids.len() + 1 >= session.capacity() {
            messages.pop();
            eprintln!(
                "(the conversation would need {} positions of the {} this chat holds: /reset, or a larger --context)",
                ids.len() + 1,
                session.capacity()
            );
            refused += 1;
            continue;
        }
        let mut text_out = ReplyText::new(crate::stdout());
        let (stats, reply) =
            pollster::block_on(session.reply(&ctx, &model, &ids, &options, |t| {
                let _ = text_out.write(&t.text);
                !interrupted.swap(false, Ordering::Relaxed)
            }))?;
        text_out.end_line()?;
        eprintln!("({})", stats_line(&stats));
        let content = model.decode(&reply, true)?;
        messages.push(Message::new("assistant", content.trim_end()));
    }
    if scripted && refused > 0 {
        return Err(format!(
            "{refused} turn{} of the piped conversation could not be answered (see above)",
            if refused == 1 { "" } else { "s" }
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// A reply's text as it streams, each piece flushed; [`ReplyText::end_line`] ends its line
/// unless the reply's own text did (no empty line after a reply ending in a newline).
struct ReplyText<W: Write> {
    out: W,
    ends_line: bool,
}

impl<W: Write> ReplyText<W> {
    fn new(out: W) -> Self {
        Self {
            out,
            ends_line: true,
        }
    }

    fn write(&mut self, text: &str) -> std::io::Result<()> {
        if !text.is_empty() {
            self.ends_line = text.ends_with('\n');
        }
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }

    fn end_line(&mut self) -> std::io::Result<()> {
        if !self.ends_line {
            writeln!(self.out)?;
        }
        self.out.flush()
    }
}

/// One line of `input` with its newline (`None` at the end of input), or the error of the
/// read a signal interrupted: `BufRead::read_until` retries those, so Ctrl-C at the prompt
/// would go unseen until the next line, then stop that line's reply.
fn read_line(input: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        if let Some(end) = buf.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&buf[..=end]);
            input.consume(end + 1);
            return Ok(Some(line));
        }
        let n = buf.len();
        line.extend_from_slice(buf);
        input.consume(n);
    }
}

/// A flag set by Ctrl-C (SIGINT) instead of ending the process: a reply in progress stops,
/// and a read of standard input returns `Interrupted`. A second Ctrl-C before the first was
/// taken (a long prompt's prefill runs before any token can stop it) ends the process with
/// status 130.
fn interrupt_flag() -> &'static AtomicBool {
    static FLAG: AtomicBool = AtomicBool::new(false);
    #[cfg(unix)]
    {
        extern "C" fn on_sigint(_: libc::c_int) {
            if FLAG.swap(true, Ordering::Relaxed) {
                // SAFETY: `_exit` is async-signal-safe.
                unsafe { libc::_exit(INTERRUPTED as libc::c_int) };
            }
            let note = b"\n(stopping; Ctrl-C again quits at once)\n";
            // SAFETY: `write` is async-signal-safe; the note is a static buffer.
            unsafe { libc::write(2, note.as_ptr().cast(), note.len()) };
        }
        // SAFETY: the handler only stores to an atomic (async-signal-safe); the sigaction
        // struct is zeroed, then filled; no SA_RESTART, so a blocked read returns EINTR.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigint as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        }
    }
    &FLAG
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Input whose reads go: "ab", a signal, "c\nd".
    struct Reads(Vec<std::io::Result<&'static [u8]>>, &'static [u8]);

    impl Read for Reads {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            unreachable!("read through BufRead")
        }
    }

    impl BufRead for Reads {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            if self.1.is_empty() && !self.0.is_empty() {
                self.1 = self.0.remove(0)?;
            }
            Ok(self.1)
        }
        fn consume(&mut self, n: usize) {
            self.1 = &self.1[n..];
        }
    }

    /// A signal during the read at the chat's prompt reaches the caller (Ctrl-C leaves),
    /// where `read_until` retried it and the flag then stopped the next line's reply.
    #[test]
    fn a_read_interrupted_by_a_signal_is_the_callers() {
        let interrupted = std::io::Error::from(std::io::ErrorKind::Interrupted);
        let mut input = Reads(vec![Ok(b"ab"), Err(interrupted), Ok(b"c\nd")], b"");
        let e = read_line(&mut input).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert_eq!(read_line(&mut input).unwrap().unwrap(), b"c\n");
        assert_eq!(read_line(&mut input).unwrap().unwrap(), b"d");
        assert!(read_line(&mut input).unwrap().is_none());
    }
}
