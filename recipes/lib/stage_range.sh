# Sourced by every recipe's run.sh (recipes/lib/stages.sh for the corpus recipes, recipes/synth/run.sh).
# check_stage_range LAST: $stage and $stop_stage are whole numbers in 0..LAST and stage <= stop_stage,
# else one error line and exit 2. Why: `[ "$stage" -le N ]` with stage=x fails as "false", so
# `--stage x`, `--stage 9` or `--stage 3 --stop_stage 1` ran no stage and exited 0, which a script
# reads as "done".
check_stage_range() {
  local last=$1 name value
  for name in stage stop_stage; do
    value=${!name}
    case "$value" in
      ''|*[!0-9]*) echo "$0: error: --$name '$value': not a stage number; the stages are 0-$last" >&2; exit 2 ;;
    esac
    if [ "$((10#$value))" -gt "$last" ]; then
      echo "$0: error: --$name $value: no such stage; the stages are 0-$last" >&2; exit 2
    fi
  done
  if [ "$((10#$stage))" -gt "$((10#$stop_stage))" ]; then
    echo "$0: error: --stage $stage is after --stop_stage $stop_stage, so no stage would run; give --stop_stage >= --stage" >&2
    exit 2
  fi
}
