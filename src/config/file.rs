//! The `--config` TOML file, read through the flags' own declaration: a key is a flag's long
//! name, its value is checked by the flag's parser and becomes the flag's default, so the
//! command line and the environment still win (flag, environment, file, built-in default).
//! A flag's help heading says where its key may stand: process-wide settings at the top
//! level only, route settings at the top level and in `[[route]]` tables; other flags are
//! command-line only. A new setting is a `Cli` field and nothing here.
//! Errors name the key and its line.

use std::path::Path;

use clap::error::{ContextKind, ContextValue};
use clap::{Arg, ArgAction, Command, CommandFactory, FromArgMatches};
use serde::de::IntoDeserializer;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::{Cli, PROCESS, ROUTE};
use crate::auth::table::{AllowRule, AuthTable};
use crate::card::CardSettings;

/// A config file read and checked against the flags.
pub struct FileConfig {
    /// The top-level settings.
    pub top: TableSettings,
    /// One per `[[route]]` table; none: the top-level settings are the one route.
    pub routes: Vec<RouteFile>,
}

/// The settings of one table: flag ids and long names with their values as on the
/// command line, and the `card`, `auth` and `allow` tables.
#[derive(Default)]
pub struct TableSettings {
    flags: Vec<Flag>,
    pub card: Option<CardSettings>,
    pub auth: Option<AuthTable>,
    pub allow: Option<Vec<AllowRule>>,
}

struct Flag {
    id: String,
    long: String,
    values: Vec<String>,
}

impl TableSettings {
    /// `command` with these settings as its flags' defaults (the top level: the command
    /// line and the environment win).
    pub fn as_defaults(&self, mut command: Command) -> Command {
        for flag in &self.flags {
            command = command.mut_arg(&flag.id, |arg| arg.default_values(flag.values.clone()));
        }
        command
    }

    /// Sets these settings over `cli` (a route's: they win over the command line, the
    /// environment and the top level), parsed by the flags' own parsers.
    pub fn set_over(&self, cli: &mut Cli) -> Result<(), clap::Error> {
        let args = self.flags.iter().flat_map(|flag| {
            let values = flag.values.iter();
            values.map(|value| format!("--{}={value}", flag.long))
        });
        let matches = TABLE_COMMAND.with(|command| {
            let mut command = command.borrow_mut();
            let command = command.get_or_insert_with(|| {
                // Only what the table gives may be present: no defaults, no environment.
                Cli::command().no_binary_name(true).mut_args(|arg| {
                    let arg = arg.env(None).default_values(Vec::<String>::new());
                    match arg.get_action() {
                        ArgAction::SetTrue => arg.action(ArgAction::Set).num_args(1),
                        _ => arg,
                    }
                })
            });
            command.try_get_matches_from_mut(args)
        })?;
        // clap's update of an absent `Option` subcommand demands one in the matches; a
        // table has none, so a stand-in holds the command line's place meanwhile.
        let stand_in = super::Command::CheckConfig {
            file: std::path::PathBuf::new(),
        };
        let subcommand = cli.command.replace(stand_in);
        let updated = cli.update_from_arg_matches(&matches);
        cli.command = subcommand;
        updated
    }
}

thread_local! {
    /// The command a table's settings are parsed with, made once: making it (clap's
    /// declarations of every flag) was half the time of loading 10,000 routes.
    static TABLE_COMMAND: std::cell::RefCell<Option<Command>> = const { std::cell::RefCell::new(None) };
}

/// One `[[route]]` table: what selects the route, then its settings.
pub struct RouteFile {
    pub name: String,
    /// The line of the route's `name`, for messages.
    pub line: usize,
    /// Public path prefix, e.g. `/agents/billing`.
    pub path: Option<String>,
    /// `Host` the route answers for.
    pub host: Option<String>,
    pub settings: TableSettings,
}

/// Where a table stands, for what it may hold and how errors name its keys.
#[derive(Clone, Copy)]
enum Place {
    Top,
    Route(usize),
}

/// Reads the file, parses it and checks every key and value against `command`'s flags.
pub fn read(path: &Path, command: &Command) -> Result<FileConfig, String> {
    crate::watched::note(path);
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    parse(&text, command)
}

/// Parses TOML text and checks it against `command`'s flags.
pub fn parse(text: &str, command: &Command) -> Result<FileConfig, String> {
    // Every route's label names its line: the newlines are found once, not counted from
    // the start for each (which made 10,000 routes take seconds).
    let newlines: Vec<usize> = memchr::memchr_iter(b'\n', text.as_bytes()).collect();
    let line = |offset: usize| newlines.partition_point(|&at| at < offset) + 1;
    let root = DeTable::parse(text).map_err(|e| match e.span() {
        Some(span) => format!("line {}: {}", line(span.start), e.message()),
        None => e.message().to_owned(),
    })?;
    let mut checker = command.clone();
    checker.build();
    let reader = Reader {
        command: &checker,
        line: &line,
    };
    let mut file = FileConfig {
        top: TableSettings::default(),
        routes: Vec::new(),
    };
    for (key, value) in root.into_inner() {
        if key.get_ref() == "route" {
            file.routes = reader.routes(value)?;
        } else {
            reader.setting(&mut file.top, Place::Top, key, value)?;
        }
    }
    Ok(file)
}

/// Checks tables against the flags, naming a bad key and its line.
struct Reader<'a> {
    /// Built, so that every flag has its parser.
    command: &'a Command,
    line: &'a dyn Fn(usize) -> usize,
}

type Key<'t> = Spanned<toml::de::DeString<'t>>;
type Value<'t> = Spanned<DeValue<'t>>;

impl Reader<'_> {
    fn fail(&self, place: Place, key: &str, at: usize, why: impl std::fmt::Display) -> String {
        let line = (self.line)(at);
        // A key is the file's text, of any length: bounded and escaped as a log field.
        let key = crate::telemetry::untrusted::clipped(key);
        match place {
            Place::Top => format!("line {line}: key `{key}`: {why}"),
            Place::Route(i) => format!("line {line}: key `route[{i}].{key}`: {why}"),
        }
    }

    /// The `[[route]]` tables.
    fn routes(&self, value: Value<'_>) -> Result<Vec<RouteFile>, String> {
        let at = value.span().start;
        let DeValue::Array(tables) = value.into_inner() else {
            return Err(self.fail(Place::Top, "route", at, "must be [[route]] tables"));
        };
        let mut routes = Vec::with_capacity(tables.len());
        for (i, table) in tables.into_iter().enumerate() {
            let at = table.span().start;
            let DeValue::Table(table) = table.into_inner() else {
                return Err(self.fail(Place::Top, "route", at, "must be [[route]] tables"));
            };
            routes.push(self.route(Place::Route(i), at, table)?);
        }
        Ok(routes)
    }

    fn route(&self, place: Place, at: usize, table: DeTable<'_>) -> Result<RouteFile, String> {
        let (mut name, mut path, mut host) = (None, None, None);
        let mut settings = TableSettings::default();
        for (key, value) in table {
            let slot = match key.get_ref().as_ref() {
                "name" => &mut name,
                "path" => &mut path,
                "host" => &mut host,
                _ => {
                    self.setting(&mut settings, place, key, value)?;
                    continue;
                }
            };
            let start = value.span().start;
            let DeValue::String(text) = value.into_inner() else {
                return Err(self.fail(place, key.get_ref(), start, "must be a string"));
            };
            *slot = Some((text.into_owned(), start));
        }
        let Some((name, start)) = name else {
            return Err(self.fail(place, "name", at, "missing: every route has a name"));
        };
        Ok(RouteFile {
            name,
            line: (self.line)(start),
            path: path.map(|(path, _)| path),
            host: host.map(|(host, _)| host),
            settings,
        })
    }

    /// One setting of a table: the `card`, `auth` or `allow` table, or a flag's value.
    fn setting(
        &self,
        into: &mut TableSettings,
        place: Place,
        key: Key<'_>,
        value: Value<'_>,
    ) -> Result<(), String> {
        match key.get_ref().as_ref() {
            "card" => into.card = Some(self.table(place, "card", value)?),
            "auth" => into.auth = Some(self.table(place, "auth", value)?),
            "allow" => into.allow = Some(self.table(place, "allow", value)?),
            _ => return self.flag(into, place, key, value),
        }
        Ok(())
    }

    /// A flag's value.
    fn flag(
        &self,
        into: &mut TableSettings,
        place: Place,
        key: Key<'_>,
        value: Value<'_>,
    ) -> Result<(), String> {
        let (name, at) = (key.get_ref().as_ref(), key.span().start);
        let arg = self
            .command
            .get_arguments()
            .find(|arg| arg.get_long() == Some(name));
        let heading = arg.and_then(Arg::get_help_heading);
        let arg = match (arg, heading, place) {
            (Some(arg), Some(ROUTE), _) | (Some(arg), Some(PROCESS), Place::Top) => arg,
            (Some(_), Some(PROCESS), Place::Route(_)) => {
                return Err(self.fail(place, name, at, "is process-wide: set it at the top level"))
            }
            (Some(_), _, _) => {
                return Err(self.fail(place, name, at, "is a command-line flag only"))
            }
            (None, _, _) => return Err(self.fail(place, name, at, "unknown key")),
        };
        let at = value.span().start;
        let many = matches!(arg.get_action(), ArgAction::Append);
        let values = texts(value.get_ref(), many).map_err(|why| self.fail(place, name, at, why))?;
        // A route's list takes the top level's when it has no values, so `[]` cannot mean
        // "none here": refused rather than read as the opposite of what it says.
        if values.is_empty() && matches!(place, Place::Route(_)) {
            let why = "an empty list in a route means the top level's list, not none: leave \
                       the key out for that, or set the list per route where it must differ";
            return Err(self.fail(place, name, at, why));
        }
        for text in &values {
            check(arg, text).map_err(|why| self.fail(place, name, at, why))?;
        }
        into.flags.push(Flag {
            id: arg.get_id().to_string(),
            long: name.to_owned(),
            values,
        });
        Ok(())
    }

    /// A table (or an array of tables) named `name`, as its type declares it.
    fn table<T: serde::de::DeserializeOwned>(
        &self,
        place: Place,
        name: &str,
        value: Value<'_>,
    ) -> Result<T, String> {
        let span = value.span();
        serde_path_to_error::deserialize(value.into_deserializer()).map_err(|e| {
            let path = e.path().to_string();
            let dot = if path.starts_with('[') { "" } else { "." };
            let key = format!("{name}{dot}{path}");
            let at = e.inner().span().unwrap_or(span).start;
            self.fail(place, &key, at, e.inner().message())
        })
    }
}

/// A TOML value as the flag's arguments: one, or a list where the flag repeats.
fn texts(value: &DeValue, many: bool) -> Result<Vec<String>, &'static str> {
    match value {
        DeValue::Array(items) if many => items.iter().map(|item| text(item.get_ref())).collect(),
        DeValue::Array(_) => Err("takes one value, not a list"),
        value => text(value).map(|text| vec![text]),
    }
}

fn text(value: &DeValue) -> Result<String, &'static str> {
    match value {
        DeValue::String(text) => Ok(text.to_string()),
        DeValue::Integer(n) => Ok(n.to_string()),
        DeValue::Float(x) => Ok(x.as_str().to_owned()),
        DeValue::Boolean(b) => Ok(b.to_string()),
        _ => Err("must be a string, a number, a boolean or a list of them"),
    }
}

/// Runs the flag's own parser on one value, as if it were given alone on the command line.
fn check(arg: &Arg, value: &str) -> Result<(), String> {
    let alone = arg
        .clone()
        .action(ArgAction::Set)
        .num_args(1)
        .value_parser(arg.get_value_parser().clone());
    let command = Command::new("file").no_binary_name(true).arg(alone);
    let mut flag = std::ffi::OsString::from("--");
    flag.push(arg.get_long().unwrap_or_default());
    flag.push("=");
    flag.push(value);
    match command.try_get_matches_from([flag]) {
        Ok(_) => Ok(()),
        Err(error) => Err(why(&error, value, arg.is_hide_env_values_set())),
    }
}

/// Why a flag's parser refused a file value; a secret's value is not repeated.
fn why(error: &clap::Error, value: &str, secret: bool) -> String {
    let shown = if secret {
        "the value".to_owned()
    } else {
        format!("{value:?}")
    };
    // A parser's own message says what it refused (the secret one accepts any text).
    if let Some(source) = std::error::Error::source(error) {
        return source.to_string();
    }
    match error.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(valid)) => {
            format!("{shown} is not one of {}", valid.join(", "))
        }
        _ => format!("{shown} is not valid"),
    }
}
