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

# .si(): an immutable signature, run with its own arguments only (no result before them)
chain(add.s(1, 2), add.si(5, 5), add.s(100)).delay()   # add(1, 2), add(5, 5), add(10, 100)

# a countdown holds back the first step (or every member of a group)
chain(add.s(1, 2), add.s(10)).apply_async(countdown=2)

# empty: a group's result is [], a chord's callback runs once with []
assert group([]).delay().result() == []
assert group([]).then(total.s(extra=1)).delay().result(timeout=60) == 1
