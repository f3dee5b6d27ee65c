"""Reading who this process is from torchrun's or SLURM's variables."""

from __future__ import annotations

from trainkit.launch.environment import detect_environment, first_slurm_host


def test_torchrun_variables() -> None:
    env = detect_environment(
        {
            "RANK": "3",
            "LOCAL_RANK": "1",
            "WORLD_SIZE": "4",
            "MASTER_ADDR": "node07",
            "MASTER_PORT": "29511",
        }
    )
    assert (env.global_rank, env.local_rank, env.world_size) == (3, 1, 4)
    assert (env.master_addr, env.master_port, env.source) == ("node07", 29511, "torchrun")
    assert env.launched_externally


def test_slurm_variables() -> None:
    env = detect_environment(
        {
            "SLURM_PROCID": "5",
            "SLURM_LOCALID": "1",
            "SLURM_NTASKS": "8",
            "SLURM_NODELIST": "gpu[12-15]",
            "SLURM_JOB_ID": "4242",
            "SLURM_JOB_NAME": "train",
        }
    )
    assert (env.global_rank, env.local_rank, env.world_size) == (5, 1, 8)
    assert env.master_addr == "gpu12" and env.master_port == 10000 + 4242
    assert env.source == "slurm" and env.launched_externally


def test_torchrun_wins_over_slurm_and_an_interactive_srun_is_local() -> None:
    both = {"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    assert detect_environment(both).source == "torchrun"
    interactive = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_NAME": "bash"}
    assert detect_environment(interactive).source == "local"
    assert detect_environment({}).world_size == 1


def test_first_slurm_host() -> None:
    assert first_slurm_host("node[03-05,09],gpu1") == "node03"
    assert first_slurm_host("gpu1,gpu2") == "gpu1"
    assert first_slurm_host("a-[1,2]-x") == "a-1-x"
    assert first_slurm_host("") == "127.0.0.1"
