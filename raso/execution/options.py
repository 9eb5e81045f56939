"""Where a run's rollouts execute: the `execution` section of the run's config (raso.execution.executors runs
them). Light on purpose: the configuration imports it without the executors, their pools or clusters."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raso.choices import ExecutorKind


class ExecutionOptions(BaseModel):
    """Where a run's rollouts execute (the `execution` section of the run's config)."""

    model_config = ConfigDict(extra="forbid")

    executor: ExecutorKind = Field(default="threads", description="what runs the rollouts: threads (in this "
                                   "process), processes (a local pool), dask or ray (a cluster's workers)")
    address: str | None = Field(default=None, description="an existing cluster: a Dask scheduler "
                                "(tcp://host:8786) or a Ray address (host:6379, ray://host:10001, auto); None starts "
                                "a local one on this machine")
    workers: int | None = Field(default=None, ge=1, description="rollouts run at once: threads or processes, or the "
                                "workers of the local cluster started for the run; None = schedule.workers. With an "
                                "address, the cluster's own size decides")
    driver_host: str | None = Field(default=None, description="the host name or IP address at which the workers "
                                    "reach this process's model-call server; None = the local address on the route "
                                    "to the cluster (loopback for a local one)")

    @model_validator(mode="after")
    def _address_needs_a_cluster(self) -> ExecutionOptions:
        if self.executor in ("threads", "processes") and (self.address or self.driver_host):
            given = "address" if self.address else "driver_host"
            raise ValueError(f"{given} is for a cluster: set executor to dask or ray (executor {self.executor} runs "
                             "on this machine)")
        return self


__all__ = ["ExecutionOptions"]
