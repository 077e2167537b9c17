from kindling import chain, group, task


@task
def add(x: int, y: int) -> int:
    return x + y


@task
def total(results: list[int], extra: int = 0) -> int:
    return sum(results) + extra


# each result is the next step's first argument: add(add(1, 2), 10) -> 13
handle = chain(add.s(1, 2), add.s(10)).delay()
handle.result(timeout=60)                # the last step's result; JobFailed names a step that died
handle.ids                               # every step's job id, known before any has run

# a chord: total runs once, after all ten members, with their results in the group's order
handle = group([add.s(i, i) for i in range(10)]).then(total.s(extra=1)).delay()
handle.result(timeout=60)                # total's result; JobFailed if the chord failed
handle.status()                          # waiting, completed or dead (the chord's record)
