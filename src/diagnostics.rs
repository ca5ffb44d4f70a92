//! Source files, spans and diagnostics: what every stage reports problems with.
//!
//! A [`Diagnostic`] names a file, a byte span, a message, a label for the span and a help line.
//! It renders two ways: for people, through miette with the source line in view (our own
//! `miette::Diagnostic` over the whole file, so columns stay right on non-ASCII lines); and for
//! machines, as the JSON object `warden check --format json` prints.

use std::fmt;
use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

/// The most a policy import (`use module`, `use rego`, `use rego data`) may read, per file.
pub const MAX_IMPORT_BYTES: u64 = 16 << 20;

/// Reads a file a policy imports: a regular file (symbolic links followed) of at most `max`
/// bytes. A device, FIFO or socket is refused before it is opened, and a file is never read
/// past `max` (even one that grows meanwhile), so `use rego "/dev/zero"` fails at once. The
/// error names the file and the limit.
pub fn read_import(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{shown}: not a regular file (a folder, device, FIFO or socket cannot be imported)"
        ));
    }
    let too_large = |len: u64| {
        format!(
            "{shown}: {len} bytes or more, over the import limit of {max} bytes ({} MiB)",
            max >> 20
        )
    };
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The most a policy's own `.ward` file may hold: the import bound, so a root file is held to
/// what a `use`d module is.
pub const MAX_SOURCE_BYTES: u64 = MAX_IMPORT_BYTES;

/// Refuses, before it is read, a `.ward` file a command was given that is over
/// [`MAX_SOURCE_BYTES`] or not a regular file; the error names the file and the limit. (A file
/// that grows past the limit after this look is read whole by `check::load`.)
pub fn source_within_bounds(path: &Path) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{shown}: not a regular file (a folder, device, FIFO or socket is not a policy)"
        ));
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(format!(
            "{shown}: {} bytes, over the limit of {MAX_SOURCE_BYTES} bytes ({} MiB) for a .ward file",
            meta.len(),
            MAX_SOURCE_BYTES >> 20
        ));
    }
    Ok(())
}

/// A byte range in one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: u32,
    /// Byte offset just past the last byte.
    pub end: u32,
}

impl Span {
    /// The span from byte `start` to byte `end`.
    pub fn new(start: usize, end: usize) -> Self {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Whether it covers no byte (a point).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// The span from this one's start to `other`'s end.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// As a byte range.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    /// Whether byte `offset` is inside it (its end included, so a cursor at the end counts).
    pub fn contains(&self, offset: usize) -> bool {
        (self.start as usize) <= offset && offset <= (self.end as usize)
    }
}

/// Index of a file in a [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// One source text and the name it is reported under.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The file's name as diagnostics show it.
    pub name: String,
    /// Its text.
    pub text: Arc<str>,
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// A file named `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<Arc<str>>) -> Self {
        let text: Arc<str> = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    /// Zero-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        }
    }

    fn clamp(&self, offset: usize) -> usize {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }

    /// 1-based line and 1-based column counted in characters.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = self.clamp(offset);
        let line = self.line_of(offset);
        let col = self.text[self.line_starts[line]..offset].chars().count();
        (line + 1, col + 1)
    }

    /// 0-based line and 0-based column in UTF-16 code units, as LSP counts them.
    pub fn line_col_utf16(&self, offset: usize) -> (u32, u32) {
        let offset = self.clamp(offset);
        let line = self.line_of(offset);
        let col: usize = self.text[self.line_starts[line]..offset]
            .chars()
            .map(char::len_utf16)
            .sum();
        (line as u32, col as u32)
    }

    /// The byte offset of a 0-based line and UTF-16 column; positions past the end clamp.
    pub fn offset_utf16(&self, line: u32, col: u32) -> usize {
        let Some(&start) = self.line_starts.get(line as usize) else {
            return self.text.len();
        };
        let mut units = 0u32;
        for (i, ch) in self.text[start..].char_indices() {
            if units >= col || ch == '\n' {
                return start + i;
            }
            units += ch.len_utf16() as u32;
        }
        self.text.len()
    }

    /// How many lines it has.
    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }
}

/// All the files of one policy load.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// Adds a file; its id.
    pub fn add(&mut self, file: SourceFile) -> FileId {
        self.files.push(file);
        FileId(self.files.len() as u32 - 1)
    }

    /// The file with this id.
    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// Every file with its id.
    pub fn iter(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }

    /// The file named `name`, if one is.
    pub fn find(&self, name: &str) -> Option<FileId> {
        self.iter().find(|(_, f)| f.name == name).map(|(id, _)| id)
    }
}

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The policy cannot be used.
    Error,
    /// The policy works, but probably not as meant.
    Warning,
}

/// A second place a diagnostic points at ("first defined here").
#[derive(Debug, Clone, PartialEq)]
pub struct Related {
    /// Where.
    pub span: Span,
    /// What the span shows.
    pub label: String,
}

/// Declares [`Code`]: each variant with its stable text.
macro_rules! codes {
    ($($variant:ident = $text:literal,)*) => {
        /// Every diagnostic code the loader, the parser, the checker, the compiler and the test
        /// runner give: one type, read by whoever acts on a code (the language server, the
        /// docs test) instead of a string compared in each place. Each code's text (its
        /// [`Code::as_str`], what [`Diagnostic::code`] and the JSON form carry) is stable, and
        /// docs/language.md documents every one.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $(
                #[doc = concat!("`", $text, "`")]
                $variant,
            )*
        }

        impl Code {
            /// Every code, in the order of their texts.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The code's stable text, `stage::name`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $text,)*
                }
            }
        }
    };
}

codes! {
    Ambiguous = "check::ambiguous",
    Arity = "check::arity",
    BadArgument = "check::bad_argument",
    BadPart = "check::bad_part",
    BadReasonCode = "check::bad_reason_code",
    BadRegex = "check::bad_regex",
    BadRego = "check::bad_rego",
    BadWindow = "check::bad_window",
    ConflictingModifications = "check::conflicting_modifications",
    ConstantTest = "check::constant_test",
    Cycle = "check::cycle",
    Duplicate = "check::duplicate",
    DynamicRegex = "check::dynamic_regex",
    FieldNotOnHook = "check::field_not_on_hook",
    HistoryJoin = "check::history_join",
    IllegalDecision = "check::illegal_decision",
    Misplaced = "check::misplaced",
    MisplacedCurrent = "check::misplaced_current",
    MissingFixture = "check::missing_fixture",
    MissingPart = "check::missing_part",
    MissingRego = "check::missing_rego",
    NestedHistory = "check::nested_history",
    NoDefault = "check::no_default",
    NoProvenance = "check::no_provenance",
    NotAValue = "check::not_a_value",
    NotCallable = "check::not_callable",
    NullComparison = "check::null_comparison",
    QuantifierScope = "check::quantifier_scope",
    Shadows = "check::shadows",
    TooManyLabels = "check::too_many_labels",
    TypeMismatch = "check::type_mismatch",
    UnknownArgument = "check::unknown_argument",
    UnknownClass = "check::unknown_class",
    UnknownEffect = "check::unknown_effect",
    UnknownEnum = "check::unknown_enum",
    UnknownField = "check::unknown_field",
    UnknownFunction = "check::unknown_function",
    UnknownHook = "check::unknown_hook",
    UnknownLabel = "check::unknown_label",
    UnknownModule = "check::unknown_module",
    UnknownName = "check::unknown_name",
    UnknownOrigin = "check::unknown_origin",
    UnknownReasonCode = "check::unknown_reason_code",
    UnknownRegoBuiltin = "check::unknown_rego_builtin",
    UnknownRegoRule = "check::unknown_rego_rule",
    UnknownRole = "check::unknown_role",
    UnknownType = "check::unknown_type",
    Unreachable = "check::unreachable",
    UnreadableModule = "check::unreadable_module",
    Unused = "check::unused",
    CompileRego = "compile::rego",
    CompileRegoLetInput = "compile::rego_let_input",
    CompileRegoLetNoValue = "compile::rego_let_no_value",
    CompileUnsupported = "compile::unsupported",
    LoadUnreadable = "load::unreadable",
    SyntaxBadEscape = "syntax::bad_escape",
    SyntaxBadNumber = "syntax::bad_number",
    SyntaxDuplicatePart = "syntax::duplicate_part",
    SyntaxInternal = "syntax::internal",
    SyntaxNotUtf8 = "syntax::not_utf8",
    SyntaxTooDeep = "syntax::too_deep",
    SyntaxUnexpected = "syntax::unexpected",
    SyntaxUnknownType = "syntax::unknown_type",
    TestError = "test::error",
    TestFailed = "test::failed",
}

impl Code {
    /// The code with this text.
    pub fn parse(text: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == text)
    }
}

impl From<Code> for &'static str {
    fn from(c: Code) -> &'static str {
        c.as_str()
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A diagnostic's code (its text) is compared with a [`Code`] as the code it is.
impl PartialEq<Code> for &str {
    fn eq(&self, other: &Code) -> bool {
        *self == other.as_str()
    }
}

/// A code compared with its text (tests and callers holding the JSON form).
impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Code> for str {
    fn eq(&self, other: &Code) -> bool {
        self == other.as_str()
    }
}

/// A suggested edit: replace `span` with `replacement` (used by `did you mean` code actions).
#[derive(Debug, Clone, PartialEq)]
pub struct Fix {
    /// What to replace.
    pub span: Span,
    /// The text to put there.
    pub replacement: String,
}

/// One problem found in a policy: where, what, and how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Stable machine name, e.g. `check::unknown_field` ([`Code::as_str`] gives the text).
    pub code: Code,
    /// One line: what is wrong.
    pub message: String,
    /// The file it is in.
    pub file: FileId,
    /// Where in the file.
    pub span: Span,
    /// What the primary span shows.
    pub label: String,
    /// How to fix it.
    pub help: Option<String>,
    /// Other places that explain it.
    pub related: Vec<Related>,
    /// A replacement an editor can apply.
    pub fix: Option<Fix>,
}

impl Diagnostic {
    /// An error with this code, at `span` in `file`.
    pub fn error(code: Code, file: FileId, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            file,
            span,
            label: String::new(),
            help: None,
            related: Vec::new(),
            fix: None,
        }
    }

    /// A warning with this code, at `span` in `file`.
    pub fn warning(code: Code, file: FileId, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, file, span, message)
        }
    }

    /// Sets what the primary span shows.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Sets how to fix it.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Adds another place, with what it shows.
    pub fn with_related(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related.push(Related {
            span,
            label: label.into(),
        });
        self
    }

    /// Adds a replacement an editor can apply.
    pub fn with_fix(mut self, span: Span, replacement: impl Into<String>) -> Self {
        self.fix = Some(Fix {
            span,
            replacement: replacement.into(),
        });
        self
    }

    /// Whether it is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The machine form of a diagnostic (`--format json`, and the LSP's source of truth).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct JsonDiagnostic {
    /// The file's name.
    pub file: String,
    /// First line (1-based).
    pub line: usize,
    /// First column (1-based, in characters).
    pub column: usize,
    /// Last line (1-based).
    pub end_line: usize,
    /// Column just past the end (1-based).
    pub end_column: usize,
    /// Error or warning.
    pub severity: Severity,
    /// The code (`check::unknown_field`).
    pub code: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

impl JsonDiagnostic {
    /// The JSON form of `diagnostic`, its positions read from `sources`.
    pub fn new(sources: &SourceMap, diagnostic: &Diagnostic) -> Self {
        let file = sources.get(diagnostic.file);
        let (line, column) = file.line_col(diagnostic.span.start as usize);
        let (end_line, end_column) = file.line_col(diagnostic.span.end as usize);
        JsonDiagnostic {
            file: file.name.clone(),
            line,
            column,
            end_line,
            end_column,
            severity: diagnostic.severity,
            code: diagnostic.code.to_string(),
            message: diagnostic.message.clone(),
            help: diagnostic.help.clone(),
        }
    }
}

/// Diagnostics of one policy load, with the sources they point into.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    /// The files the diagnostics point into.
    pub sources: SourceMap,
    /// The diagnostics, in the order found.
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Whether any is an error.
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    /// How many errors.
    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.is_error()).count()
    }

    /// How many warnings.
    pub fn warning_count(&self) -> usize {
        self.items.len() - self.error_count()
    }

    /// Sorted by file, then position, so output is stable.
    pub fn sort(&mut self) {
        self.items.sort_by(|a, b| {
            (a.file, a.span.start, a.span.end).cmp(&(b.file, b.span.start, b.span.end))
        });
        self.items.dedup();
    }

    /// Each diagnostic in its JSON form (`--format json`).
    pub fn to_json(&self) -> Vec<JsonDiagnostic> {
        self.items
            .iter()
            .map(|d| JsonDiagnostic::new(&self.sources, d))
            .collect()
    }

    /// Renders every diagnostic for a terminal; `color` selects ANSI colours.
    pub fn render(&self, color: bool) -> String {
        let mut out = String::new();
        for d in &self.items {
            out.push_str(&render(&self.sources, d, color));
        }
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl std::error::Error for Diagnostics {}

/// Renders one diagnostic with its source context (feature `fancy`: through miette's
/// graphical handler; without it, on one line: [`render_plain`]).
#[cfg(feature = "fancy")]
pub fn render(sources: &SourceMap, diagnostic: &Diagnostic, color: bool) -> String {
    let file = sources.get(diagnostic.file);
    let report = Report {
        file,
        named: Named(file),
        diagnostic,
    };
    let theme = if color {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let handler = miette::GraphicalReportHandler::new_themed(theme)
        .with_width(100)
        .with_links(false)
        .with_context_lines(1);
    let mut out = String::new();
    if handler.render_report(&mut out, &report).is_err() {
        // Rendering into a String cannot fail in practice; keep the plain form as a fallback.
        out = render_plain(sources, diagnostic);
    }
    out
}

/// Renders one diagnostic with its source context (feature `fancy`: through miette's
/// graphical handler; without it, on one line: [`render_plain`]).
#[cfg(not(feature = "fancy"))]
pub fn render(sources: &SourceMap, diagnostic: &Diagnostic, _color: bool) -> String {
    render_plain(sources, diagnostic)
}

/// One diagnostic on one line: `code: file:line:col: message`.
pub fn render_plain(sources: &SourceMap, diagnostic: &Diagnostic) -> String {
    let file = sources.get(diagnostic.file);
    let (line, col) = file.line_col(diagnostic.span.start as usize);
    format!(
        "{}: {}:{}:{}: {}\n",
        diagnostic.code, file.name, line, col, diagnostic.message
    )
}

/// The adapter miette renders: one diagnostic over its whole file.
#[cfg(feature = "fancy")]
struct Report<'a> {
    file: &'a SourceFile,
    named: Named<'a>,
    diagnostic: &'a Diagnostic,
}

#[cfg(feature = "fancy")]
impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
    }
}

#[cfg(feature = "fancy")]
impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
    }
}

#[cfg(feature = "fancy")]
impl std::error::Error for Report<'_> {}

#[cfg(feature = "fancy")]
struct Named<'a>(&'a SourceFile);

#[cfg(feature = "fancy")]
impl miette::SourceCode for Named<'_> {
    fn read_span<'b>(
        &'b self,
        span: &miette::SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'b> + 'b>, miette::MietteError> {
        let inner =
            self.0
                .text
                .as_ref()
                .read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(miette::MietteSpanContents::new_named(
            self.0.name.clone(),
            inner.data(),
            *inner.span(),
            inner.line(),
            inner.column(),
            inner.line_count(),
        )))
    }
}

#[cfg(feature = "fancy")]
impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diagnostic.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diagnostic
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.named)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let len = self.file.text.len();
        let clamp = move |s: Span| {
            let start = (s.start as usize).min(len);
            let end = (s.end as usize).min(len).max(start);
            (start, end - start)
        };
        let (start, n) = clamp(self.diagnostic.span);
        let primary = miette::LabeledSpan::new_primary_with_span(
            (!self.diagnostic.label.is_empty()).then(|| self.diagnostic.label.clone()),
            (start, n),
        );
        let related = self.diagnostic.related.iter().map(move |r| {
            let (s, n) = clamp(r.span);
            miette::LabeledSpan::new_with_span(Some(r.label.clone()), (s, n))
        });
        Some(Box::new(std::iter::once(primary).chain(related)))
    }
}

/// Suggests the closest candidate to a misspelt name (`did you mean …?`).
pub fn did_you_mean<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (wanted.chars().count() / 3).max(1) + usize::from(wanted.len() > 6);
    candidates
        .into_iter()
        .map(|c| (edit_distance(wanted, c), c))
        .filter(|(d, c)| *d <= limit && *d < c.chars().count())
        .min_by_key(|(d, c)| (*d, c.len()))
        .map(|(_, c)| c)
}

/// Levenshtein distance, with an adjacent swap counted as one edit.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev2 = vec![0usize; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0usize; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(prev2[j - 2] + 1);
            }
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_one_of_its_kind_and_named_by_stage() {
        let mut texts: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert!(texts.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        for c in Code::ALL {
            assert_eq!(Code::parse(c.as_str()), Some(*c));
            let (stage, name) = c.as_str().split_once("::").unwrap();
            assert!(["check", "compile", "load", "syntax", "test"].contains(&stage));
            assert!(!name.is_empty());
        }
        texts.dedup();
        assert_eq!(texts.len(), Code::ALL.len());
        assert_eq!(Code::parse(concat!("check", "::nothing_like_it")), None);
        assert!("check::unused" == Code::Unused);
    }

    #[test]
    fn columns_count_characters_and_utf16_units() {
        let f = SourceFile::new("x", "é𝄞a\nb");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col("é𝄞".len()), (1, 3));
        assert_eq!(f.line_col_utf16("é𝄞".len()), (0, 3));
        assert_eq!(f.offset_utf16(0, 3), "é𝄞".len());
        assert_eq!(f.line_col(f.text.len()), (2, 2));
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            did_you_mean("tool.nme", ["tool.name", "tool.version"]),
            Some("tool.name")
        );
        assert_eq!(did_you_mean("argz", ["args", "outputs"]), Some("args"));
        assert_eq!(did_you_mean("zzzz", ["args"]), None);
        assert_eq!(edit_distance("ab", "ba"), 1);
    }
}
