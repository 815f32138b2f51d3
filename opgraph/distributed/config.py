"""The one module of ``opgraph.distributed`` that reads environment variables: whether this
process was started by an MPI launcher (``mpiexec``/``mpirun``, Hydra, Open MPI, PMIx).

Launchers tell their processes who they are through the environment: MPICH's Hydra and Intel
MPI set ``PMI_RANK``/``PMI_SIZE`` (and ``PMI_FD``), Open MPI sets ``OMPI_COMM_WORLD_RANK``/
``OMPI_COMM_WORLD_SIZE``, PMIx sets ``PMIX_RANK``, MVAPICH ``MV2_COMM_WORLD_RANK``, and Hydra's
own variables start with ``HYDRA_``. Slurm's ``SLURM_*`` are not counted: ``srun`` also starts
plain programs.
"""

from __future__ import annotations

import os

#: Variables any of which means "started by an MPI launcher".
LAUNCHER_VARIABLES = (
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_FD",
    "PMIX_RANK",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "MV2_COMM_WORLD_RANK",
    "MV2_COMM_WORLD_SIZE",
)
LAUNCHER_PREFIXES = ("HYDRA_",)


def launcher_variables() -> dict[str, str]:
    """The MPI launcher variables set in this process's environment (empty when none is)."""
    return {
        name: value
        for name, value in sorted(os.environ.items())
        if name in LAUNCHER_VARIABLES or name.startswith(LAUNCHER_PREFIXES)
    }


def launched_by_mpi() -> str:
    """How this process looks started by an MPI launcher ("PMI_RANK=1, PMI_SIZE=2"), or ""
    when no launcher variable is set."""
    found = launcher_variables()
    return ", ".join(f"{name}={value}" for name, value in list(found.items())[:4])
