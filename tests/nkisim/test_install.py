"""nkisim.install() wires `neuronxcc.nki` to the simulator, and refuses to shadow a real
neuronx-cc. Each case runs in a fresh interpreter so sys.modules starts clean."""
import subprocess
import sys
import textwrap


def run_python(code: str, *, extra_path: str | None = None) -> subprocess.CompletedProcess:
    env_path = [extra_path] if extra_path else []
    prelude = f"import sys; sys.path[:0] = {env_path!r}\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60)


def test_install_makes_the_course_imports_resolve_to_nkisim():
    result = run_python("""
        import nkisim
        nkisim.install()
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl
        import neuronxcc.nki.isa as nisa
        from neuronxcc.nki import baremetal, benchmark
        from neuronxcc.nki.isa import constants
        import nkisim.nki
        assert nki.jit is nkisim.nki.jit and baremetal is nki.baremetal is nkisim.nki.baremetal
        assert constants.engine.vector == nisa.vector_engine
        print(nl.tile_size.pmax, nisa.get_nc_version().name)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["128", "gen3"]


def fake_real_neuronxcc(tmp_path):
    pkg = tmp_path / "neuronxcc" / "nki"
    pkg.mkdir(parents=True)
    (tmp_path / "neuronxcc" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("REAL = True\n")
    return str(tmp_path)


def test_install_refuses_to_shadow_a_real_neuronxcc(tmp_path):
    result = run_python("""
        import nkisim
        try:
            nkisim.install()
        except nkisim.RealNeuronxccPresentError as err:
            print("refused:", err)
        else:
            raise SystemExit("install() shadowed the real compiler")
        import neuronxcc.nki
        assert neuronxcc.nki.REAL
    """, extra_path=fake_real_neuronxcc(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "real neuronx-cc is installed" in result.stdout and "force=True" in result.stdout


def test_install_force_simulates_even_with_a_real_neuronxcc(tmp_path):
    result = run_python("""
        import nkisim
        nkisim.install(force=True)
        import neuronxcc.nki as nki
        assert not hasattr(nki, "REAL") and nki.baremetal is nkisim.nki.baremetal
        nkisim.uninstall()
        import importlib, sys
        import neuronxcc.nki
        assert neuronxcc.nki.REAL
    """, extra_path=fake_real_neuronxcc(tmp_path))
    assert result.returncode == 0, result.stderr


def test_placeholder_neuronxcc_without_nki_does_not_block_install(tmp_path):
    # the PyPI `neuronx-cc` placeholder is an empty package: not a real compiler
    (tmp_path / "neuronxcc").mkdir()
    (tmp_path / "neuronxcc" / "__init__.py").write_text("")
    result = run_python("""
        import nkisim
        nkisim.install()
        import neuronxcc.nki as nki
        assert nki.jit is nkisim.nki.jit
    """, extra_path=str(tmp_path))
    assert result.returncode == 0, result.stderr


def test_install_makes_both_dialects_importable_and_uninstall_removes_them():
    result = run_python("""
        import importlib
        import nkisim
        try:
            import nki
        except ModuleNotFoundError:
            pass
        else:
            raise SystemExit("nki importable before install")
        nkisim.install()
        import nki, nki.isa as nisa, nki.language as nl, nki.typing as nt
        import neuronxcc.nki as legacy
        import nkisim.nki06
        assert nki.jit is nkisim.nki06.jit and legacy.jit is nkisim.nki.jit
        assert nisa.engine.vector.name == "vector" and nl.shared_hbm is not nl.hbm
        print(nki.__version__, nisa.get_nc_version().name)
        nkisim.uninstall()
        import sys
        assert "nki" not in sys.modules and "neuronxcc" not in sys.modules
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0.6.0", "gen3"]


def test_install_refuses_to_shadow_a_real_nki_package(tmp_path):
    pkg = tmp_path / "nki"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("REAL = True\n")
    (pkg / "isa.py").write_text("")
    result = run_python("""
        import nkisim
        try:
            nkisim.install()
        except nkisim.RealNeuronxccPresentError as err:
            print("refused:", err)
        else:
            raise SystemExit("install() shadowed the real nki package")
        import nki
        assert nki.REAL
    """, extra_path=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "refused:" in result.stdout and "force=True" in result.stdout


def test_a_module_nki_does_not_have_is_refused_saying_which_it_has():
    result = run_python("""
        import importlib
        import nkisim
        nkisim.install()
        def refusal(name):
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as err:
                return str(err)
        assert "collectives run across NeuronCores" in refusal("nki.collectives")
        # nkisim's own modules behind the facade are not NKI's
        for name in ("nki.bind", "nki.views", "neuronxcc.nki.names"):
            assert "not a module of NKI; the modules are" in refusal(name), name
        assert importlib.import_module("nki.isa").dma_copy
        nkisim.uninstall()
        assert refusal("nki.collectives") is not None and "nkisim" not in refusal("nki.collectives")
    """)
    assert result.returncode == 0, result.stderr
