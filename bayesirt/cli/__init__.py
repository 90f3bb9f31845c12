"""The command-line tool and the declared-analysis runner."""
