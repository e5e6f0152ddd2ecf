"""FLOATER's training solve alone, side by side in one process: forward and backward of the
knots for a training grid, by the host-timed RK4 loop (the card's default), by
``torchdiffeq.odeint`` (the same RK4 steps) and by the loop with its RK4 step compiled
(``torch.compile``), which also reports its compile time. Rounds interleaved, median.

    python benchmarks/flow_solver.py                       # the copy card's decoder (d=64, 4 layers), 256 positions
    python benchmarks/flow_solver.py --positions 1024 --rounds 10
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from pebench.encodings.flow import CompiledStep, Flow, rk4_knots
from pebench.model.transformer import ModelConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    torch.set_flush_denormal(True)
    geometry = ModelConfig(d_model=args.d_model, n_heads=4, n_layers=args.layers).geometry(args.positions, args.positions)
    flows = {name: Flow(geometry, step_size=0.4, backend=backend) for name, backend in (("host-timed loop", "pebench"), ("torchdiffeq", "torchdiffeq"))}
    for flow in flows.values():
        flow.load_state_dict(flows["host-timed loop"].state_dict())
    reference = flows["host-timed loop"]
    compiled_step = CompiledStep()
    knots = reference.grid_points(args.positions)

    def compiled(flow: Flow) -> torch.Tensor:
        return rk4_knots(flow.dynamics, flow.initial, 0, knots - 1, flow.knot_spacing, flow.steps_per_knot, compiled_step)

    solves = {name: (lambda flow=flow: flow.integrate(flow.initial, 0, knots - 1)) for name, flow in flows.items()}
    solves["loop, RK4 step compiled"] = lambda: compiled(reference)
    tick = time.perf_counter()
    solves["loop, RK4 step compiled"]().square().sum().backward()  # compiles forward and backward
    compile_seconds = time.perf_counter() - tick
    assert torch.allclose(solves["loop, RK4 step compiled"](), rk4_knots(reference.dynamics, reference.initial, 0, knots - 1,
                                                                          reference.knot_spacing, reference.steps_per_knot), atol=1e-5)
    times = {name: [] for name in solves}
    for round_ in range(args.rounds + 1):
        for name in list(solves)[round_ % len(solves):] + list(solves)[: round_ % len(solves)]:
            tick = time.perf_counter()
            solves[name]().square().sum().backward()
            if round_:
                times[name].append(time.perf_counter() - tick)
    base = statistics.median(times["host-timed loop"])
    print(f"FLOATER training solve, forward + backward: {len(geometry.sites)} sites ({reference.initial.shape[0]} channels) of d={args.d_model}, "
          f"{args.positions} positions ({knots} knots, {knots - 1} RK4 steps), {torch.get_num_threads()} threads, median of {args.rounds}")
    for name, values in times.items():
        print(f"  {name:26s} {1000 * statistics.median(values):7.1f} ms   x{statistics.median(values) / base:.2f}")
    print(f"  compiling the RK4 step took {compile_seconds:.1f} s")


if __name__ == "__main__":
    main()
