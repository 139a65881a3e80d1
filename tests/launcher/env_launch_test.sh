#!/bin/sh
# Starts 3 ranks of a weft program by hand with the environment a launcher would give them
# (torchrun, Open MPI's mpirun, Slurm's srun) and checks that every one of them exits 0.
#   env_launch_test.sh PROGRAM torchrun|ompi|slurm
# Prints "PASS (<launcher>)" on success. Bounded: every rank is killed after 60 s. The ranks get
# WEFT_TEST_NRANKS, the number of ranks.
set -u
prog=$1
launcher=$2
n=3
export WEFT_TEST_NRANKS=$n
# The root's port: one that nothing holds now (tests/free_port.py).
port=$(python3 "$(dirname "$0")/../free_port.py") || exit 1
pids=""
for r in 0 1 2; do
  case $launcher in
    torchrun) env RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
                timeout 60 "$prog" > "/tmp/weft-env-$$-$r.log" 2>&1 & ;;
    ompi) env OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n OMPI_COMM_WORLD_LOCAL_RANK=$r \
            OMPI_COMM_WORLD_LOCAL_SIZE=$n WEFT_ROOT=127.0.0.1:$port \
            timeout 60 "$prog" > "/tmp/weft-env-$$-$r.log" 2>&1 & ;;
    slurm) env SLURM_PROCID=$r SLURM_NTASKS=$n SLURM_LOCALID=$r SLURM_JOB_ID=$$ SLURM_STEP_ID=0 \
             WEFT_ROOT=127.0.0.1:$port timeout 60 "$prog" > "/tmp/weft-env-$$-$r.log" 2>&1 & ;;
    *) echo "unknown launcher $launcher"; exit 2 ;;
  esac
  pids="$pids $!"
done
status=0
for p in $pids; do wait "$p" || status=1; done
for r in 0 1 2; do sed "s/^/[$r] /" "/tmp/weft-env-$$-$r.log"; rm -f "/tmp/weft-env-$$-$r.log"; done
[ $status -eq 0 ] && echo "PASS ($launcher)"
exit $status
