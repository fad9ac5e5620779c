-- What the lake holds: per day and participant, item changes (each once) and transactions.
SELECT dt AS day, participant, count(*) AS changes, count(DISTINCT txid) AS transactions
FROM changes
WHERE type = 'item'
GROUP BY dt, participant
ORDER BY day, participant
