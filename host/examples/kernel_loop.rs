//! The kernel in a loop of your own: no sockets, no journal, no lockgrid
//! server — a world, a fixed timestep, and what each player sees.
//!
//! ```sh
//! cargo run -p lockgrid-host --example kernel_loop
//! ```
//!
//! Two players walk towards each other past a crowd of resting NPCs; every
//! tick prints the events of the first player and the tick's digest.

use lockgrid_kernel::{Command, Config, Event, Fix, Move, Pos, Spawn, Visibility, World};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config {
        visibility: Visibility::Radius,
        hysteresis: Fix::from_num(10),
        ..Config::default()
    };
    let mut world = World::new(config)?;
    let mut events = Vec::new();

    // Tick 1: two observers (players) with a view radius of 150 units, and
    // a row of NPCs between them.
    let mut spawns = vec![
        Command::Spawn(Spawn::observer(
            1,
            Pos::from_ints(100, 500),
            Fix::from_num(150),
        )),
        Command::Spawn(Spawn::observer(
            2,
            Pos::from_ints(900, 500),
            Fix::from_num(150),
        )),
    ];
    for i in 0..8 {
        spawns.push(Command::Spawn(Spawn::npc(
            100 + i,
            Pos::from_ints(200 + 80 * i as i32, 520),
        )));
    }
    let report = world.step(&spawns, &mut events);
    println!(
        "tick {}: {} events, digest {:016x}",
        report.tick, report.events, report.digest
    );

    // Then the players walk 40 units a tick towards each other. A game
    // loop would gather these from its clients; the kernel only needs the
    // tick's commands in the order they apply.
    for _ in 0..20 {
        let tick = world.tick() + 1;
        let step = 40 * tick as i32;
        let moves = [
            Command::Move(Move {
                id: 1,
                pos: Pos::from_ints((100 + step).min(900), 500),
                dir: 0,
                speed: Fix::from_num(800),
            }),
            Command::Move(Move {
                id: 2,
                pos: Pos::from_ints((900 - step).max(100), 500),
                dir: 32768,
                speed: Fix::from_num(800),
            }),
        ];
        events.clear();
        let report = world.step(&moves, &mut events);
        let mine: Vec<String> = events
            .iter()
            .filter(|e| e.order_key().is_some_and(|k| k.0 == 1))
            .map(|e| match e {
                Event::Enter { subject, .. } => format!("+{subject}"),
                Event::Leave { subject, .. } => format!("-{subject}"),
                Event::Update { subject, .. } => format!("~{subject}"),
                other => format!("{other:?}"),
            })
            .collect();
        println!(
            "tick {}: player 1 sees {:?} (digest {:016x})",
            report.tick,
            mine.join(" "),
            report.digest
        );
    }
    // The same commands from a fresh world give the same digests on any
    // machine: a journal of them is a replay.
    let view: Vec<_> = world.view(1).map(|v| v.collect()).unwrap_or_default();
    println!("player 1's final view: {view:?}");
    Ok(())
}
