//! The redlease command.

fn main() {
    println!("redlease: not yet implemented");
}
