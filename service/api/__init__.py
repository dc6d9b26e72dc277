"""HTTP entrypoints: Litestar handlers per audience. They parse, call one use case, map the result."""
