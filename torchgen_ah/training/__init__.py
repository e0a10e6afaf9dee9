"""Training and code generation: ranking decision trees from timing logs, written as pure-Python artifacts."""
