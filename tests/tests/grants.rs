//! `template.yaml`'s grants proven from the calls, not from reading (`twopc_tests::grants`):
//! `make test` runs every suite with `TWOPC_RECORD_AWS_CALLS` set (each function's AWS
//! requests recorded through the one client loader, `twopc_runtime::Aws`), then the ignored
//! test below on that record; `make sam-local` runs the other on its own. The rest check the
//! checker on records made here.

use std::collections::BTreeSet;

use twopc_function::var;
use twopc_tests::grants::{RecordLine, check, read_record};
use twopc_tests::template::{TEMPLATE, Template};

fn recorded() -> BTreeSet<RecordLine> {
    let folder = std::env::var(var::RECORD_AWS_CALLS).unwrap_or_else(|_| {
        panic!(
            "{} is not set: run `make test`, which records the suites' calls and runs this last",
            var::RECORD_AWS_CALLS
        )
    });
    let calls = read_record(std::path::Path::new(&folder)).expect("the record");
    assert!(!calls.is_empty(), "nothing was recorded in {folder}");
    calls
}

#[test]
#[ignore = "make test runs it after every suite, on their record"]
fn the_template_grants_every_recorded_call_and_says_why_it_grants_the_rest() {
    let report = check(&Template::repo(), &recorded());
    println!("{report}");
    assert!(
        report.grants_every_call() && report.unexplained.is_empty(),
        "{report}"
    );
}

#[test]
#[ignore = "make sam-local runs it on the calls of the functions it ran in Lambda's container"]
fn the_template_grants_every_call_sam_local_recorded() {
    let report = check(&Template::repo(), &recorded());
    println!("{report}");
    assert!(report.grants_every_call(), "{report}");
}

fn call(role: &str, action: &str, resource: &str) -> RecordLine {
    RecordLine {
        role: role.to_owned(),
        action: action.to_owned(),
        resource: [resource.to_owned()].into(),
        unnamed: None,
    }
}

/// The template without the first line equal to `line` after `after`.
fn without(after: &str, line: &str) -> String {
    let at = TEMPLATE.find(after).expect("the anchor");
    let i = at + TEMPLATE[at..].find(line).expect("the line");
    format!("{}{}", &TEMPLATE[..i], &TEMPLATE[i + line.len()..])
}

#[test]
fn a_call_whose_grant_is_removed_is_reported_missing() {
    let calls = [call(
        "participant",
        "dynamodb:PutItem",
        var::PARTICIPANT_TABLE,
    )]
    .into();
    assert!(check(&Template::repo(), &calls).missing.is_empty());
    let text = without(
        "  WalletsParticipantFunction:",
        "                - dynamodb:PutItem\n",
    );
    let report = check(&Template { text: &text }, &calls);
    assert_eq!(
        report.missing,
        [
            "WalletsParticipantFunction (participant) calls dynamodb:PutItem on WalletsTable \
          (recorded as {\"TWOPC_PARTICIPANT_TABLE\"})"
        ],
        "{report}"
    );
}

#[test]
fn a_resource_is_followed_through_the_functions_environment() {
    let t = Template::repo();
    let set =
        |items: &[&str]| -> BTreeSet<String> { items.iter().map(|s| (*s).to_owned()).collect() };
    assert_eq!(
        t.resolve(
            "SweeperFunction",
            "TWOPC_TRANSACTIONS_TABLE/index/pending-by-deadline"
        ),
        set(&["TransactionsTable/index/pending-by-deadline"]),
        "Globals"
    );
    assert_eq!(
        t.resolve("SweeperFunction", "TWOPC_LOCK_TABLES"),
        set(&["AccountsTable", "WalletsTable"])
    );
    assert_eq!(
        t.resolve("SweeperFunction", "TWOPC_SERVICES.lambda"),
        set(&["WalletsParticipantFunction"]),
        "the coordinator's services: recovery reads the targets it wrote"
    );
    assert_eq!(
        t.resolve("CoordinatorFunction", "TWOPC_SERVICES.direct"),
        set(&["AccountsTable"])
    );
    assert_eq!(
        t.resolve(
            "StreamProcessorFunction",
            "TWOPC_WEBSOCKET_ENDPOINT/POST/@connections"
        ),
        set(&["WebSocketApi/WebSocketStage/POST/@connections/*"])
    );
    assert!(
        t.resolve("CoordinatorFunction", "TWOPC_LOCK_TABLES")
            .is_empty(),
        "not configured so when deployed"
    );
}

#[test]
fn a_grant_no_call_exercised_needs_a_comment_naming_its_action() {
    let calls = [call(
        "participant",
        "dynamodb:PutItem",
        var::PARTICIPANT_TABLE,
    )]
    .into();
    let line = "WalletsParticipantFunction OwnItems: dynamodb:UpdateItem on WalletsTable";
    let report = check(&Template::repo(), &calls);
    assert!(report.unexplained.iter().any(|l| l == line), "{report}");
    let text = TEMPLATE.replace(
        "                - dynamodb:UpdateItem\n              Resource: !GetAtt WalletsTable.Arn",
        "                - dynamodb:UpdateItem  # kept for dynamodb:UpdateItem's sake\n              Resource: !GetAtt WalletsTable.Arn",
    );
    let report = check(&Template { text: &text }, &calls);
    assert!(report.explained.iter().any(|l| l == line), "{report}");
    assert!(!report.unexplained.iter().any(|l| l == line), "{report}");
}

#[test]
fn a_call_on_a_resource_no_variable_named_is_refused() {
    let calls = [RecordLine {
        role: "sweeper".to_owned(),
        action: "dynamodb:UpdateItem".to_owned(),
        resource: BTreeSet::new(),
        unnamed: Some("t123-elsewhere".to_owned()),
    }]
    .into();
    let report = check(&Template::repo(), &calls);
    assert!(!report.grants_every_call());
    assert_eq!(
        report.unnamed,
        ["sweeper dynamodb:UpdateItem on t123-elsewhere"]
    );
}
