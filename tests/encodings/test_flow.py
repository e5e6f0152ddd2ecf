import pytest
import torch
from torch import nn
from torchdiffeq import odeint

from pebench.encodings.base import Site
from pebench.encodings.flow import Flow
from pebench.model.transformer import ModelConfig
from tests.helpers import build, relative_error


def flow(**params) -> Flow:
    torch.manual_seed(0)
    return Flow(ModelConfig(d_model=8, n_heads=2, n_layers=2).geometry(64), **params)


class Linear(nn.Module):
    """h(t, p) = p A^T: the ODE dp/dt = A p, solved in closed form by p(t) = expm(t A) p(0)."""

    def __init__(self, matrix):
        super().__init__()
        self.matrix = nn.Parameter(matrix)

    def forward(self, t, p):
        return p @ self.matrix.T


def test_zero_dynamics_keep_the_initial_value():
    # FLOATER with h = 0: dp/dt = 0, so p(t_i) = p(0) at every position (paper sec. 3.2).
    encoding = flow()
    encoding.dynamics = Linear(torch.zeros(8, 8))
    encoding.prepare(40, torch.device("cpu"))
    solution = encoding.solution(torch.arange(40))  # [40, C, d]
    torch.testing.assert_close(solution, encoding.initial.detach().expand(40, -1, -1), rtol=0, atol=0)


def test_with_g_zero_the_bounded_flow_is_the_leak_alone():
    # pebench's h = tanh(g) - p; with g = 0, dp/dt = -p: p(t) = p(0) e^(-t), by hand.
    encoding = flow(delta=0.1, step_size=0.1).double()
    for parameter in encoding.dynamics.parameters():
        nn.init.zeros_(parameter)
    encoding.prepare(30, torch.device("cpu"))
    times = torch.arange(30, dtype=torch.float64)[:, None, None] * 0.1
    expected = encoding.initial.detach() * torch.exp(-times)
    # RK4's global error on e^(-t) at step 0.1: about t * 0.1^4 / 120, under 3e-6 relative for t <= 3
    torch.testing.assert_close(encoding.solution(torch.arange(30)), expected, rtol=3e-6, atol=0)


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_the_flow_stays_within_its_bound_at_any_length_for_any_weights(scale):
    # Each component obeys dp_i/dt = tanh(.) - p_i <= 1 - p_i, so |p_i(t)| <= max(|p_i(0)|, 1):
    # here over 4,000 positions (t up to 400), with weights up to 30x their initial scale and
    # p(0) up to about 10. The RK4 solution at the knots keeps the bound; the cubic interpolant
    # between them may overshoot it a little where the flow is stiff (0.057 measured at 30x).
    encoding = flow(delta=0.1, step_size=0.4).eval()
    with torch.no_grad():
        for parameter in encoding.dynamics.parameters():
            parameter.mul_(scale).add_(torch.randn_like(parameter) * 0.1 * scale)
        encoding.initial.mul_(50)
        encoding.prepare(4000, torch.device("cpu"))
        bound = encoding.initial.abs().clamp(min=1)  # [C, d]
        assert (encoding._knots.abs() <= bound + 1e-5).all()
        assert (encoding._solution.abs() <= 1.1 * bound).all() and torch.isfinite(encoding._solution).all()


class CubicInTime(nn.Module):
    """h(t, p) = 3 t^2 a, whatever p: the ODE is solved by p(t) = p(0) + t^3 a."""

    def __init__(self, a):
        super().__init__()
        self.a = nn.Parameter(a)

    def forward(self, t, p):
        return (3 * t**2 * self.a).expand_as(p)


def test_linear_dynamics_match_the_closed_form():
    # 80 positions span three solver chunks (CHUNK = 32): the chunk joins must not show.
    encoding = flow(delta=0.1)
    matrix = torch.randn(8, 8) * 0.3
    encoding.dynamics = Linear(matrix)
    encoding.prepare(80, torch.device("cpu"))
    got = encoding.solution(torch.arange(80))
    times = torch.arange(80, dtype=torch.float64) * 0.1
    expected = torch.stack([encoding.initial.detach().double() @ torch.linalg.matrix_exp(t * matrix.double()).T for t in times])
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


def test_a_coarser_grid_keeps_the_solvers_accuracy_between_grid_points():
    # Grid 4 Delta apart: RK4's error is O(step^4), and the cubic Hermite interpolant is of the
    # same order, so positions between grid points are about as accurate as those on them.
    encoding = flow(delta=0.1, step_size=0.4).double()
    matrix = torch.randn(8, 8, dtype=torch.float64) * 0.3
    encoding.dynamics = Linear(matrix)
    encoding.prepare(80, torch.device("cpu"))
    got = encoding.solution(torch.arange(80))
    times = torch.arange(80, dtype=torch.float64) * 0.1
    expected = torch.stack([encoding.initial.detach() @ torch.linalg.matrix_exp(t * matrix).T for t in times])
    error = ((got - expected).norm(dim=-1) / expected.norm(dim=-1)).amax(1)  # [80], relative
    assert error.max() < 1e-3
    assert error.max() < 1.5 * error[::4].max()  # the grid points are every 4th position


def test_positions_between_grid_points_are_exact_for_a_cubic_solution():
    # RK4 on an h of t alone is a quadrature rule (torchdiffeq's rk4: Simpson's 3/8), exact for
    # the cubic p(0) + t^3 a; the cubic Hermite interpolant through exact values and slopes is
    # then exact too, between grid points (t_i = 0.1 i, grid 0.4 apart: s = 1/4, 1/2, 3/4) and at
    # them (s = 0).
    encoding = flow(delta=0.1, step_size=0.4).double()
    a = torch.randn(8, dtype=torch.float64)
    encoding.dynamics = CubicInTime(a)
    encoding.prepare(23, torch.device("cpu"))
    times = torch.arange(23, dtype=torch.float64)[:, None, None] * 0.1
    expected = encoding.initial.detach() + times**3 * a  # [23, C, d]
    torch.testing.assert_close(encoding.solution(torch.arange(23)), expected, rtol=1e-12, atol=1e-12)
    assert encoding.grid_points(23) == 7  # t_22 = 2.2 lies in [2.0, 2.4]: grid points 0, 0.4, ..., 2.4


def test_gradients_reach_dynamics_and_initial_values():
    for backend, adjoint in (("pebench", False), ("torchdiffeq", False), ("torchdiffeq", True)):
        encoding = flow(adjoint=adjoint, backend=backend)
        encoding.prepare(20, torch.device("cpu"))
        encoding.solution(torch.arange(20)).square().sum().backward()
        assert encoding.initial.grad is not None and encoding.initial.grad.abs().sum() > 0
        for parameter in encoding.dynamics.parameters():
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0


def test_chunked_solve_matches_one_solver_call_in_values_and_gradients():
    encoding = flow(delta=0.1, backend="torchdiffeq").double()  # float64: the two orders of summation agree to round-off
    weights = torch.randn(100, *encoding.initial.shape, dtype=torch.float64)
    encoding.prepare(100, torch.device("cpu"))
    (encoding.solution(torch.arange(100)) * weights).sum().backward()
    chunked = [p.grad.clone() for p in encoding.parameters()]
    encoding.zero_grad()
    times = torch.arange(100, dtype=torch.float64) * 0.1
    whole = odeint(encoding.dynamics, encoding.initial, times, method="rk4", options={"step_size": 0.1})
    (whole * weights).sum().backward()
    torch.testing.assert_close(encoding.solution(torch.arange(100)), whole, rtol=1e-10, atol=1e-12)
    for got, expected in zip(chunked, (p.grad for p in encoding.parameters())):
        torch.testing.assert_close(got, expected, rtol=1e-8, atol=1e-10)


def test_adjoint_and_direct_gradients_agree():
    # The adjoint solves the continuous gradient backwards; direct backpropagation differentiates
    # the discrete forward solve. They agree once the grid is fine (here Delta / 5).
    grads = []
    for adjoint in (False, True):
        encoding = flow(adjoint=adjoint, step_size=0.02, backend="torchdiffeq")
        encoding.prepare(20, torch.device("cpu"))
        encoding.solution(torch.arange(20)).square().sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in encoding.parameters()]))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("step_size", [0.1, 0.4, 0.025])  # every position a knot; 3 in 4 interpolated; 4 steps a knot
def test_evaluation_caches_and_extends_the_solution(step_size):
    encoding = flow(step_size=step_size).eval()
    with torch.no_grad():
        encoding.prepare(10, torch.device("cpu"))
        first, grid = encoding._solution, encoding._knots.clone()
        encoding.prepare(8, torch.device("cpu"))
        assert encoding._solution is first  # reused, not re-solved
        encoding.prepare(25, torch.device("cpu"))  # integrates further in t from the cached grid
        assert torch.equal(encoding._knots[: len(grid)], grid)
        extended = encoding._solution[:25].clone()
        encoding._cache_key = None
        encoding.prepare(25, torch.device("cpu"))  # a fresh full solve
    torch.testing.assert_close(extended, encoding._solution[:25], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("step_size", [0.1, 0.4])
def test_step_by_step_decoding_solves_and_interpolates_rarely(step_size):
    # Incremental decoding asks for one more position per call; the grid grows geometrically.
    encoding = flow(step_size=step_size).eval()
    calls = []
    integrate, interpolate = encoding.integrate, encoding.interpolate
    encoding.integrate = lambda *args: calls.append("integrate") or integrate(*args)
    encoding.interpolate = lambda *args: calls.append("interpolate") or interpolate(*args)
    with torch.no_grad():
        for n in range(1, 201):
            encoding.prepare(n, torch.device("cpu"))
            assert encoding._solution.shape[0] >= n
    assert calls.count("integrate") <= 9 and calls.count("interpolate") <= 9  # log2(200) + 1


def test_a_hook_before_prepare_says_what_to_do():
    with pytest.raises(RuntimeError, match="prepare"):
        flow().query_bias(torch.arange(3), Site("decoder", 0, "self"))


def test_cache_is_dropped_when_parameters_change():
    encoding = flow().eval()
    with torch.no_grad():
        encoding.prepare(10, torch.device("cpu"))
        before = encoding._solution.clone()
        encoding.initial.add_(1.0)
        encoding.prepare(10, torch.device("cpu"))
    assert not torch.allclose(before, encoding._solution)


def test_every_site_gets_its_own_initial_values_and_one_shared_dynamics():
    geometry = ModelConfig(d_model=8, n_heads=2, n_layers=3, architecture="encoder_decoder").geometry(16)
    encoding = Flow(geometry)
    assert encoding.initial.shape == (3 * len(geometry.sites), 8)  # q, k, v of 9 sites
    assert encoding.channel[Site("decoder", 2, "cross")] == 3 * 8


def test_each_site_biases_its_projections_with_its_own_q_k_and_v_channels():
    geometry = ModelConfig(d_model=8, n_heads=2, n_layers=2, architecture="encoder_decoder").geometry(16)
    encoding, pos = Flow(geometry), torch.tensor([4, 0, 2])
    encoding.prepare(5, torch.device("cpu"))
    solution = encoding.solution(pos)  # [3, C, d], C = 3 per site
    for i, site in enumerate(geometry.sites):  # channels 3i (q), 3i + 1 (k), 3i + 2 (v)
        torch.testing.assert_close(encoding.query_bias(pos, site), solution[:, 3 * i])
        torch.testing.assert_close(encoding.key_value_bias(pos, site), torch.cat((solution[:, 3 * i + 1], solution[:, 3 * i + 2]), -1))


def test_input_placement_adds_to_embeddings_only():
    model = build("flow", placement="input")
    assert model.encoding.initial.shape == (1, 32)
    tokens = torch.randint(1, 20, (2, 9))
    assert model(tokens).shape == (2, 9, 20)


@pytest.mark.parametrize("backend", ["pebench", "torchdiffeq"])
def test_a_step_finer_than_delta_returns_the_solvers_values_at_every_position(backend):
    # 4 solver steps per position; 75 positions span three torchdiffeq chunks (CHUNK = 32 knots)
    encoding = flow(delta=0.1, step_size=0.025, backend=backend).double()
    encoding.prepare(75, torch.device("cpu"))
    times = torch.arange(75, dtype=torch.float64) * 0.1
    direct = odeint(encoding.dynamics, encoding.initial, times, method="rk4", options={"step_size": 0.025})
    torch.testing.assert_close(encoding.solution(torch.arange(75)), direct, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("delta, step_size, positions_per_knot", [(0.1, None, 1), (0.1, 0.3, 3), (0.1, 0.7, 7), (0.05, 0.4, 8), (0.1, 1 / 30, 1)])
def test_whole_ratios_are_recognised_through_float_round_off(delta, step_size, positions_per_knot):
    # 3 * 0.1 is 0.30000000000000004 in floating point, yet 0.3 is three steps of 0.1
    assert flow(delta=delta, step_size=step_size).positions_per_knot == positions_per_knot


@pytest.mark.parametrize("steps", [(0.1, 0.1), (0.1, 0.4), (0.1, 0.025)])  # (delta, step_size): one step a knot, a step per 4 positions, 4 steps a position
def test_the_host_timed_rk4_is_torchdiffeqs_rk4_in_values_and_every_gradient(steps):
    # The pebench backend against torchdiffeq.odeint(method="rk4") on the same knots, float64:
    # the same arithmetic (the 3/8 rule), so equal to 1e-10 in the solution and every gradient.
    delta, step_size = steps
    weights = None
    results = []
    for backend in ("pebench", "torchdiffeq"):
        encoding = flow(delta=delta, step_size=step_size, backend=backend).double()
        encoding.prepare(70, torch.device("cpu"))
        solution = encoding.solution(torch.arange(70))
        weights = torch.randn(solution.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) if weights is None else weights
        (solution * weights).sum().backward()
        results.append((solution.detach(), [p.grad.clone() for p in encoding.parameters()]))
    (ours, our_grads), (theirs, their_grads) = results
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    for mine, reference in zip(our_grads, their_grads, strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-10, atol=1e-12)


def test_the_host_timed_rk4_agrees_with_torchdiffeq_in_float32():
    values, gradients = [], []
    for backend in ("pebench", "torchdiffeq"):
        encoding = flow(backend=backend, step_size=0.4)
        encoding.prepare(100, torch.device("cpu"))
        solution = encoding.solution(torch.arange(100))
        solution.square().sum().backward()
        values.append(solution.detach())
        gradients.append(torch.cat([p.grad.flatten() for p in encoding.parameters()]))
    assert relative_error(values[0], values[1]) < 1e-5 and relative_error(gradients[0], gradients[1]) < 1e-5


def test_training_solves_one_grid_for_the_whole_run():
    # The grid covers the run's longest training sequence whatever the batch's length, so the
    # solve has one shape (capturable) and reads no device value to size itself.
    geometry = ModelConfig(d_model=8, n_heads=2, n_layers=1).geometry(200, 34)
    encoding = Flow(geometry, step_size=0.4).train()
    lengths = set()
    for batch_length in (5, 17, 34):
        encoding.prepare(batch_length, torch.device("cpu"))
        lengths.add(encoding._solution.shape[0])
    assert lengths == {34}
    encoding.prepare(50, torch.device("cpu"))  # longer than any training sequence (a benchmark shape): covered too
    assert encoding._solution.shape[0] == 50


def test_a_position_state_that_is_not_finite_is_named_with_its_position_and_time():
    encoding = flow(step_size=0.1).eval()
    with torch.no_grad():
        encoding.dynamics.outer.bias[0] = float("nan")
        with pytest.raises(FloatingPointError, match=r"not finite from position 1 \(t = 0.1\) of 12 positions"):
            encoding.prepare(12, torch.device("cpu"))


@pytest.mark.parametrize("params, message", [
    ({"delta": 0.0}, "must be positive"),
    ({"step_size": -0.4}, "must be positive"),
    ({"placement": "output"}, "placement must be one of"),
    ({"step_size": 0.25}, r"whole multiple or a whole fraction of delta; got step_size=0.25, delta=0.1: set step_size too, e.g. to 0.4"),
    ({"step_size": 0.03}, "whole multiple or a whole fraction of delta"),
    ({"backend": "scipy"}, "backend must be one of"),
    ({"solver": "dopri5"}, "pebench backend solves with rk4 and direct gradients"),
    ({"adjoint": True}, "for solver='rk4' or adjoint=true set backend=\"torchdiffeq\""),
    ({"compile": True, "backend": "torchdiffeq"}, "compiles the pebench backend's RK4 step only"),
])
def test_bad_parameters_are_refused_with_the_reason(params, message):
    with pytest.raises(ValueError, match=message):
        flow(**params)


def test_the_compiled_rk4_step_computes_the_eager_one():
    # opt-in (compile = true): the same solution and gradients, to float32 round-off
    results = []
    for compile_ in (False, True):
        encoding = flow(step_size=0.4, compile=compile_)
        encoding.prepare(24, torch.device("cpu"))
        solution = encoding.solution(torch.arange(24))
        solution.square().sum().backward()
        results.append((solution.detach(), torch.cat([p.grad.flatten() for p in encoding.parameters()])))
    assert relative_error(results[1][0], results[0][0]) < 1e-5 and relative_error(results[1][1], results[0][1]) < 1e-5
