"""Reference solution fixture for the guide's `reference: {file: reference_solution.py}`."""


def fibonacci(n):
    if n <= 1:
        return n
    return fibonacci(n - 1) + fibonacci(n - 2)
