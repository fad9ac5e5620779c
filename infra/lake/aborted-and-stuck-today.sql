-- Today's aborted transactions, and committed ones not yet applied everywhere (fewer item
-- changes in the lake than the transaction commits).
SELECT t.txid, t.status, t.committedat, t.items AS expected, count(i.eventid) AS applied
FROM changes t
LEFT JOIN changes i ON i.type = 'item' AND i.txid = t.txid AND i.dt >= t.dt
WHERE t.type = 'transaction' AND t.dt = cast(current_date AS varchar)
GROUP BY t.txid, t.status, t.committedat, t.items
HAVING t.status = 'ABORTED' OR count(i.eventid) < t.items
ORDER BY t.committedat
