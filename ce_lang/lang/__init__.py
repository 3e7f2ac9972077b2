"""The criteria language: grammar -> immutable AST -> checker side tables -> decisions."""
